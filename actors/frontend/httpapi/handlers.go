package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
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

// request decodes r's JSON body into a B (strict: unknown fields are
// rejected) and converts it with conv into the request the Backend takes.
func request[B, R any](h *Handler, w *responseWriter, r *http.Request, strict bool, conv func(*B, limits) (R, *apiError)) (R, error) {
	var b B
	if e := decodeBody(w, r, &b, strict, h.opts.MaxBodyBytes); e != nil {
		var zero R
		return zero, e
	}
	req, e := conv(&b, h.limits)
	if e != nil {
		return req, e
	}
	return req, nil
}

// command serves an endpoint whose Backend method (a method expression of
// Backend) answers only an error: {"status": "ok"} with status on success.
func command[B, R any](h *Handler, w *responseWriter, r *http.Request, conv func(*B, limits) (R, *apiError),
	call func(api.Backend, context.Context, R) error, status int) error {
	req, err := request(h, w, r, lenient, conv)
	if err != nil {
		return err
	}
	if err := call(h.backend, r.Context(), req); err != nil {
		return err
	}
	h.writeJSON(w, status, statusBody{"ok"})
	return nil
}

func (h *Handler) register(w *responseWriter, r *http.Request) error {
	return command(h, w, r, (*registerBody).registration, api.Backend.Register, http.StatusCreated)
}

func (h *Handler) unregister(w *responseWriter, r *http.Request) error {
	return command(h, w, r, (*unregisterBody).workerRef, api.Backend.Unregister, http.StatusOK)
}

// workers answers the Backend's list sorted by instance id and dp rank,
// with the reference's "endpoints" map filled and empty lists as [].
func (h *Handler) workers(w *responseWriter, r *http.Request) error {
	out, err := h.workerList(r.Context())
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// workerList is GET /workers's answer: the Backend's workers sorted by id,
// their ranks by dp rank, with the rank warnings of Options.RankWarnings.
func (h *Handler) workerList(ctx context.Context) ([]api.WorkerInfo, error) {
	list, err := h.backend.Workers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.WorkerInfo, len(list)) // sorted copies: the api.Backend's slices stay untouched
	for i, wi := range list {
		ranks := slices.Clone(wi.Ranks)
		if ranks == nil {
			ranks = []api.RankInfo{}
		}
		slices.SortStableFunc(ranks, func(a, b api.RankInfo) int { return cmp.Compare(a.DpRank, b.DpRank) })
		for j := range ranks {
			if h.opts.RankWarnings != nil {
				if more := h.opts.RankWarnings(ranks[j]); len(more) > 0 {
					ranks[j].Warnings = append(slices.Clip(ranks[j].Warnings), more...)
				}
			}
			if h.opts.RankBreaker != nil {
				ranks[j].Breaker = h.opts.RankBreaker(ranks[j])
			}
			if h.opts.RankHealth != nil {
				ranks[j].Health = h.opts.RankHealth(ranks[j])
			}
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
		out[i] = api.WorkerInfo{InstanceID: wi.InstanceID, Endpoints: eps, Ranks: ranks}
	}
	slices.SortStableFunc(out, func(a, b api.WorkerInfo) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	return out, nil
}

// lookup serves /query and /query_by_hash: the body converted by conv is
// passed to call, a method expression of Backend.
func lookup[B, Q any](h *Handler, w *responseWriter, r *http.Request, conv func(*B, limits) (Q, *apiError),
	call func(api.Backend, context.Context, Q) (api.QueryResult, error)) error {
	q, err := request(h, w, r, lenient, conv)
	if err != nil {
		return err
	}
	res, err := call(h.backend, r.Context(), q)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, normalizeResult(res))
	return nil
}

func (h *Handler) query(w *responseWriter, r *http.Request) error {
	return lookup(h, w, r, (*queryBody).query, api.Backend.Query)
}

func (h *Handler) queryByHash(w *responseWriter, r *http.Request) error {
	return lookup(h, w, r, (*queryByHashBody).query, api.Backend.QueryByHash)
}

// normalizeResult writes absent parts as {} and [] rather than null.
func normalizeResult(res api.QueryResult) api.QueryResult {
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
	if dw.failed != nil { // the writer's own complaint: a api.Backend bug
		h.opts.Logger.Error("httpapi: dump", "err", err)
		return internalError()
	}
	return err
}

func (h *Handler) route(w *responseWriter, r *http.Request) error {
	req, err := request(h, w, r, strict, (*routeBody).route)
	if err != nil {
		return err
	}
	g := h.opts.Admission
	if !g.Enter() {
		return overloaded(g)
	}
	defer g.Leave()
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

// booked serves /route/{request_id}/…: call, a method expression of
// Backend, acts on the path's request id.
func (h *Handler) booked(w *responseWriter, r *http.Request, call func(api.Backend, context.Context, string) error) error {
	id := r.PathValue("request_id")
	if e := checkRequestID(id); e != nil {
		return e
	}
	if err := call(h.backend, r.Context(), id); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, statusBody{"ok"})
	return nil
}

func (h *Handler) prefillDone(w *responseWriter, r *http.Request) error {
	return h.booked(w, r, api.Backend.PrefillDone)
}

func (h *Handler) free(w *responseWriter, r *http.Request) error {
	return h.booked(w, r, api.Backend.Free)
}

// session answers a session's lineage; ?chain=true (strconv.ParseBool
// spellings) adds each lineage's engine hashes. The Backend checks the id.
func (h *Handler) session(w *responseWriter, r *http.Request) error {
	req := api.SessionRequest{ID: r.PathValue("session_id")}
	if v := r.URL.Query().Get("chain"); v != "" {
		chain, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest(api.ReasonInvalidValue, "chain: %q is not a boolean (true, false, 1, 0)", clip(v))
		}
		req.Chain = chain
	}
	res, err := h.backend.Session(r.Context(), req)
	if err != nil {
		return err
	}
	res.Namespaces = slices.Clone(res.Namespaces) // the api.Backend's slice stays untouched
	if res.Namespaces == nil {
		res.Namespaces = []api.SessionNamespace{}
	}
	for i := range res.Namespaces {
		if res.Namespaces[i].Lineages == nil {
			res.Namespaces[i].Lineages = []api.SessionLineage{}
		}
	}
	h.writeJSON(w, http.StatusOK, res)
	return nil
}

// forgetSession drops a session's lineage everywhere.
func (h *Handler) forgetSession(w *responseWriter, r *http.Request) error {
	if err := h.backend.ForgetSession(r.Context(), r.PathValue("session_id")); err != nil {
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
	msg, reason := "not ready", api.ReasonNotReady
	if api.IsClientFacing(err) {
		msg = err.Error()
		var be *api.Error
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
