package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// statusBody is the reference's success answer of /register and
// /unregister ({"status": "ok"}), reused by kvrouter's bookkeeping
// endpoints and probes.
type statusBody struct {
	Status string `json:"status"`
}

// Dynamo drop-in endpoints decode leniently (unknown fields ignored, as
// serde does by default); kvrouter's own endpoints strictly.
const (
	lenient = false
	strict  = true
)

func (h *Handler) register(w *responseWriter, r *http.Request) error {
	var b registerBody
	if e := decodeBody(w, r, &b, lenient, h.opts.MaxBodyBytes); e != nil {
		return e
	}
	reg, e := b.registration()
	if e != nil {
		return e
	}
	if err := h.backend.Register(r.Context(), reg); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusCreated, statusBody{"ok"})
	return nil
}

func (h *Handler) unregister(w *responseWriter, r *http.Request) error {
	var b unregisterBody
	if e := decodeBody(w, r, &b, lenient, h.opts.MaxBodyBytes); e != nil {
		return e
	}
	ref, e := b.workerRef()
	if e != nil {
		return e
	}
	if err := h.backend.Unregister(r.Context(), ref); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, statusBody{"ok"})
	return nil
}

// workers answers the Backend's list sorted by instance id and dp rank,
// with the reference's "endpoints" map filled and empty lists as [].
func (h *Handler) workers(w *responseWriter, r *http.Request) error {
	list, err := h.backend.Workers(r.Context())
	if err != nil {
		return err
	}
	out := make([]WorkerInfo, len(list)) // sorted copies: the Backend's slices stay untouched
	for i, wi := range list {
		ranks := slices.Clone(wi.Ranks)
		if ranks == nil {
			ranks = []RankInfo{}
		}
		slices.SortStableFunc(ranks, func(a, b RankInfo) int { return cmp.Compare(a.DpRank, b.DpRank) })
		for j := range ranks {
			if ranks[j].Warnings == nil {
				ranks[j].Warnings = []string{}
			}
		}
		eps := wi.Endpoints
		if eps == nil {
			eps = make(map[messages.DpRank]string, len(ranks))
			for _, rk := range ranks {
				eps[rk.DpRank] = rk.Endpoint
			}
		}
		out[i] = WorkerInfo{InstanceID: wi.InstanceID, Endpoints: eps, Ranks: ranks}
	}
	slices.SortStableFunc(out, func(a, b WorkerInfo) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) query(w *responseWriter, r *http.Request) error {
	var b queryBody
	if e := decodeBody(w, r, &b, lenient, h.opts.MaxBodyBytes); e != nil {
		return e
	}
	q, e := b.query(h.limits)
	if e != nil {
		return e
	}
	res, err := h.backend.Query(r.Context(), q)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, normalizeResult(res))
	return nil
}

func (h *Handler) queryByHash(w *responseWriter, r *http.Request) error {
	var b queryByHashBody
	if e := decodeBody(w, r, &b, lenient, h.opts.MaxBodyBytes); e != nil {
		return e
	}
	q, e := b.query(h.limits)
	if e != nil {
		return e
	}
	res, err := h.backend.QueryByHash(r.Context(), q)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, normalizeResult(res))
	return nil
}

// normalizeResult writes absent parts as {} and [] rather than null.
func normalizeResult(res QueryResult) QueryResult {
	if res.Scores == nil {
		res.Scores = map[messages.WorkerID]map[messages.DpRank]uint64{}
	}
	if res.Frequencies == nil {
		res.Frequencies = []uint64{}
	}
	if res.TreeSizes == nil {
		res.TreeSizes = map[messages.WorkerID]map[messages.DpRank]uint64{}
	}
	return res
}

// dump streams the Backend's dump as one JSON document (see dump.go). An
// error before the first byte left the server is a normal error answer;
// after it, the connection is cut so the client never takes a truncated
// dump for a whole one.
func (h *Handler) dump(w *responseWriter, r *http.Request) error {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(h.opts.DumpTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	dw := newDumpWriter(w)
	err := h.backend.Dump(r.Context(), dw)
	if err == nil {
		err = dw.close()
	}
	if err == nil {
		return nil
	}
	if w.wrote {
		h.opts.Logger.Warn("httpapi: dump cut short", "err", err)
		return errAbort
	}
	w.Header().Del("Content-Type")
	if dw.failed != nil { // the writer's own complaint: a Backend bug
		h.opts.Logger.Error("httpapi: dump", "err", err)
		return internalError()
	}
	return err
}

func (h *Handler) route(w *responseWriter, r *http.Request) error {
	var b routeBody
	if e := decodeBody(w, r, &b, strict, h.opts.MaxBodyBytes); e != nil {
		return e
	}
	req, e := b.route(h.limits)
	if e != nil {
		return e
	}
	if req.RequestID == "" {
		req.RequestID = h.opts.NewRequestID()
	}
	res, err := h.backend.Route(r.Context(), req)
	if err != nil {
		return err
	}
	if res.RequestID == "" {
		res.RequestID = req.RequestID
	}
	h.writeJSON(w, http.StatusOK, res)
	return nil
}

func (h *Handler) prefillDone(w *responseWriter, r *http.Request) error {
	id := r.PathValue("request_id")
	if e := checkRequestID(id); e != nil {
		return e
	}
	if err := h.backend.PrefillDone(r.Context(), id); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, statusBody{"ok"})
	return nil
}

func (h *Handler) free(w *responseWriter, r *http.Request) error {
	id := r.PathValue("request_id")
	if e := checkRequestID(id); e != nil {
		return e
	}
	if err := h.backend.Free(r.Context(), id); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, statusBody{"ok"})
	return nil
}

// healthz is liveness: the process answers HTTP.
func (h *Handler) healthz(w *responseWriter, r *http.Request) error {
	h.writeJSON(w, http.StatusOK, statusBody{"ok"})
	return nil
}

// readyz is readiness: Backend.Ready. Not ready is always 503; the
// Backend's text is shown only for a client-facing error (see Backend).
func (h *Handler) readyz(w *responseWriter, r *http.Request) error {
	err := h.backend.Ready(r.Context())
	if err == nil {
		h.writeJSON(w, http.StatusOK, statusBody{"ready"})
		return nil
	}
	msg, reason := "not ready", reasonNotReady
	if isClientFacing(err) {
		msg = err.Error()
		var be *Error
		if errors.As(err, &be) && be.Reason != "" {
			reason = be.Reason
		}
	}
	return &apiError{status: http.StatusServiceUnavailable, reason: reason, msg: msg}
}

func (h *Handler) serveMetrics(w *responseWriter, r *http.Request) error {
	if h.opts.MetricsHandler != nil {
		h.opts.MetricsHandler.ServeHTTP(w, r)
		return nil
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	return h.WriteMetrics(w)
}
