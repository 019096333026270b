package httpapi

// # Dynamo's standalone selection service
//
// A Dynamo user's selection clients (Ray, custom frontends, Dynamo's own
// endpoint picker) can point at kvrouter: the paths, request fields,
// answer shapes and statuses are the reference's (its HTTP server's and
// request/response types' source, and its standalone-selection docs
// page). Each maps onto the route path, which does the same under other
// names:
//
//	POST /select               an advisory route decision (Router.Decide): nothing is booked;
//	                           with selection_id it is kept as a pending selection for
//	                           POST /reservations (bounded: 4,096 per namespace, oldest
//	                           evicted first; 2 minutes; as the reference's defaults);
//	                           advisory: true adds worker_load
//	POST /select_and_reserve   /route: decide and book, atomically in the route actor,
//	                           under selection_id (drawn when absent, as /route draws
//	                           request ids) → 200 · 409 an id already booked
//	POST /reservations         the replay form ({selection_id, model_name, routing_group})
//	                           books the pending selection of the id, once (404 when none:
//	                           expired, evicted, already booked, other namespace); the
//	                           explicit form (worker_id, dp_rank?, a prompt,
//	                           effective_prefill_tokens?) books that rank → 201
//	POST /reservations/{id}/prefill_complete   /route/{id}/prefill_done
//	POST /reservations/{id}/output_block       one more decode block on the booking
//	                           ({"decay_fraction": f} in [0, 1] re-weights all its blocks;
//	                           a decode booking's TTL restarts: it is alive)
//	DELETE /reservations/{id}  /route/{id}/free
//	GET  /loads                each namespace's booked load per candidate rank
//	POST /potential_loads      each candidate's load with the request added
//	POST /overlap_scores       each candidate's prefix through the tiers (device, then
//	                           host, then disk: cumulative) in blocks
//
// A reservation is a routed request's booking: its id is the request id,
// so /route/{id}/… and /reservations/{id}/… reach the same one, and the
// bookkeeping's caps and TTLs bound it (actors/routing, Load: 2^18
// requests, oldest evicted first; 5 minutes in prefill, 1 hour in decode
// since the last progress). routing_group is the tenant (kvrouter's
// namespace is (model_name, tenant_id)); tenant_id, its former name
// there, is accepted in bodies and in /loads' query; both default to
// "default", as there, as does model_name. selection_id's former name
// reservation_id is accepted too. Output-block progress is decode load:
// the route cost's decode_blocks of the rank grow with it.
//
// Remaining differences, each for the reason given:
//   - There is no worker catalog of its own (POST/PATCH/DELETE/GET
//     /workers with endpoint, data_parallel_size, total_kv_blocks…):
//     workers register through the indexer API's /register (or
//     Kubernetes discovery), whose serving_endpoint is the selection's
//     "endpoint" ("" for a rank registered without one). One registry
//     for both APIs keeps a worker's stream and its load together.
//   - /health and /ready: kvrouter answers /health (the indexer API's),
//     /healthz and /readyz; /ready's worker lifecycle list is /workers'
//     per-rank state.
//   - An unknown (model_name, routing_group) is 404 unknown_namespace,
//     as on /route; the reference answers 503 while the pool is not
//     ready. kvrouter cannot tell "not yet" from "never" for a namespace
//     no worker registered, and a 503 makes clients retry forever.
//   - selection ids are 1–128 characters of [A-Za-z0-9._~:-], as request
//     ids: they travel in URL paths and logs (the reference takes any
//     string).
//   - Fields that would change the choice and that kvrouter cannot honour
//     (pinned_worker, allowed_worker_ids, affinity_target,
//     routing_constraints, mm_routing_info, block_mm_infos) are refused,
//     400 unsupported_field, not ignored: a silently unpinned request is
//     a wrong answer. Fields that only tune the reference's scheduler
//     (router_config_override, priority_jump, strict_priority,
//     expected_output_tokens, track_prefill_tokens, is_eagle, the session
//     context's other keys) are ignored; session_id (or
//     session_context.session_id) is kvrouter's session hint, as on
//     /route.
//   - There is no admission queue: a select is decided at once (the
//     reference may queue it); pending_count and pending_isl_tokens are
//     always 0, and an over-capacity request is 503 overloaded (with
//     Options.Admission), not 429.
//   - worker_load.prefill_token_capacity is 0 and total_kv_blocks,
//     prefill_busy, decode_busy and kv_hint are absent: kvrouter is not
//     told an engine's batch size or cache capacity. worker_load's
//     active_prefill_tokens is the rank's with this request's own.
//   - Sequence hashes are checked (present, one per block hash) but not
//     used: kvrouter books a request's blocks without sharing them
//     between requests, so a decay_fraction re-weights all of a booking's
//     blocks (the reference re-weights those no other request holds).
//   - /overlap_scores' router_credit_blocks is the whole prefix (kvrouter
//     credits every tier alike), shared_beyond_device_blocks is null and
//     shared_cache disabled (kvrouter has no shared cache tier).
//   - Replica synchronisation (--replica-sync-*), GET /dump of the
//     selector and indexer recovery are kvrouter's cluster (etcd, load
//     shared between hosts) and its own /dump and peers. On a cluster,
//     prefill_complete and DELETE reach the member that booked the
//     request; output_block only applies on that member (404 elsewhere),
//     as the reference keeps output-block growth local; a pending
//     selection lives on the member that answered the /select, as there.
//   - The x-dynamo-meta-policy-class header (the reference's request
//     classifier plugins) is ignored.
//   - Errors carry "reason" beside "error", as on every endpoint here.
//
// Access: /select, /loads, /potential_loads and /overlap_scores are reads
// (open unless Options.ProtectReads); the rest book or release load and
// need the token when one is set, as /route does.

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
