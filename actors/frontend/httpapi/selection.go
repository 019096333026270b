package httpapi

// Dynamo's standalone selection service (doc.go, "Selection service"): a
// select is a /route decision, booked (select_and_reserve) or not
// (select); a reservation is the booking, under its selection id, that
// /route/{request_id}/… also reaches.

import (
	"net/http"

	"github.com/kvrouter/kvrouter/messages/api"
)

// selector returns the Backend's selection service, or 501 when it has
// none.
func (h *Handler) selector() (api.Selector, error) {
	if sel, ok := h.backend.(api.Selector); ok {
		return sel, nil
	}
	return nil, &apiError{status: http.StatusNotImplemented, reason: api.ReasonNotImplemented,
		msg: "this server does not serve the selection API"}
}

func (h *Handler) selectWorker(w *responseWriter, r *http.Request) error {
	return h.serveSelect(w, r, false)
}

func (h *Handler) selectAndReserve(w *responseWriter, r *http.Request) error {
	return h.serveSelect(w, r, true)
}

// serveSelect answers /select (book false: advisory, worker_load when the
// body asks advisory) and /select_and_reserve (book: the request's load
// is booked under its selection id, one drawn as /route draws request ids
// when the body names none). Both pass Options.Admission as /route does.
func (h *Handler) serveSelect(w *responseWriter, r *http.Request, book bool) error {
	sel, err := h.selector()
	if err != nil {
		return err
	}
	req, err := request(h, w, r, lenient, (*selectBody).selection)
	if err != nil {
		return err
	}
	g := h.opts.Admission
	if !g.Enter() {
		return overloaded(g)
	}
	defer g.Leave()
	req.Book = book
	if book && req.SelectionID == "" {
		req.SelectionID = h.opts.NewRequestID()
	}
	res, err := sel.Select(r.Context(), req.SelectRequest)
	if err != nil {
		return err
	}
	if book || !req.advisory {
		res.WorkerLoad = nil
	}
	if res.Overlap.DP == nil {
		res.Overlap.DP = map[string]uint64{}
	}
	h.writeJSON(w, http.StatusOK, res)
	return nil
}

// reserve books after an advisory select (POST /reservations): 201 with
// the booking, as the reference answers.
func (h *Handler) reserve(w *responseWriter, r *http.Request) error {
	sel, err := h.selector()
	if err != nil {
		return err
	}
	req, err := request(h, w, r, lenient, (*reservationBody).reservation)
	if err != nil {
		return err
	}
	res, err := sel.Reserve(r.Context(), req)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusCreated, res)
	return nil
}

// prefillComplete is the reference's POST /reservations/{id}/prefill_complete:
// prefill_done of the booking.
func (h *Handler) prefillComplete(w *responseWriter, r *http.Request) error {
	return h.booked(w, r, api.Backend.PrefillDone)
}

// freeReservation is the reference's DELETE /reservations/{id}: free.
func (h *Handler) freeReservation(w *responseWriter, r *http.Request) error {
	return h.booked(w, r, api.Backend.Free)
}

// outputBlock adds one output block to a booking: {"decay_fraction": f}
// in [0, 1], optional; an empty body is no decay.
func (h *Handler) outputBlock(w *responseWriter, r *http.Request) error {
	sel, err := h.selector()
	if err != nil {
		return err
	}
	id := r.PathValue("request_id")
	if e := checkRequestID(id); e != nil {
		return e
	}
	var b outputBlockBody
	if r.ContentLength != 0 {
		if e := decodeBody(w, r, &b, lenient, h.opts.MaxBodyBytes); e != nil {
			return e
		}
	}
	req := api.OutputBlockRequest{ID: id}
	if d := b.DecayFraction; d != nil {
		if !(*d >= 0 && *d <= 1) {
			return badRequest(api.ReasonInvalidValue, "decay_fraction must be between 0.0 and 1.0")
		}
		req.Decay, req.HasDecay = *d, true
	}
	if err := sel.OutputBlock(r.Context(), req); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, statusBody{"ok"})
	return nil
}

// loads answers GET /loads[?model_name=…&routing_group=…] (tenant_id, the
// former name, accepted).
func (h *Handler) loads(w *responseWriter, r *http.Request) error {
	sel, err := h.selector()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var f fields
	param := func(name string) *string {
		if q.Has(name) {
			v := q.Get(name)
			return &v
		}
		return nil
	}
	filter := api.LoadsFilter{ModelName: f.optName("model_name", param("model_name")),
		TenantID: f.alias("routing_group", param("routing_group"), "tenant_id", param("tenant_id"))}
	if f.err != nil {
		return f.err
	}
	res, err := sel.Loads(r.Context(), filter)
	if err != nil {
		return err
	}
	if res == nil {
		res = []api.NamespaceLoads{}
	}
	for i := range res {
		if res[i].Loads == nil {
			res[i].Loads = []api.PotentialLoad{}
		}
	}
	h.writeJSON(w, http.StatusOK, res)
	return nil
}

// potentialLoads answers each candidate's load with the request added.
func (h *Handler) potentialLoads(w *responseWriter, r *http.Request) error {
	sel, err := h.selector()
	if err != nil {
		return err
	}
	req, err := request(h, w, r, lenient, (*selectBody).selection)
	if err != nil {
		return err
	}
	res, err := sel.PotentialLoads(r.Context(), req.SelectRequest)
	if err != nil {
		return err
	}
	if res == nil {
		res = []api.PotentialLoad{}
	}
	h.writeJSON(w, http.StatusOK, res)
	return nil
}

// overlapScores answers each candidate's reach through the tiers.
func (h *Handler) overlapScores(w *responseWriter, r *http.Request) error {
	sel, err := h.selector()
	if err != nil {
		return err
	}
	req, err := request(h, w, r, lenient, (*selectBody).selection)
	if err != nil {
		return err
	}
	res, err := sel.OverlapScores(r.Context(), req.SelectRequest)
	if err != nil {
		return err
	}
	if res.Workers == nil {
		res.Workers = []api.WorkerOverlap{}
	}
	if res.SharedCache.Ranges == nil {
		res.SharedCache.Ranges = [][2]uint32{}
	}
	h.writeJSON(w, http.StatusOK, res)
	return nil
}
