package httpapi

import (
	"net/http"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages/api"
)

// edged puts an endpoint of the table behind Options.Edge: the request is
// admitted or refused from its headers (after authorize, before serve
// reads the body), and its slot is freed however serve returns — an
// error, a client that went away, a panic wrap recovers. The endpoint's
// name in the edge's metrics is its route pattern.
func edged(serve func(h *Handler, w *responseWriter, r *http.Request) error) func(h *Handler, w *responseWriter, r *http.Request) error {
	return func(h *Handler, w *responseWriter, r *http.Request) error {
		t, reason := h.opts.Edge.Enter(r.Context(), r.Pattern, h.opts.MaxBodyBytes, r.ContentLength)
		if reason != admission.ReasonNone {
			return edgeRefusal(reason, h.opts.MaxBodyBytes)
		}
		defer h.opts.Edge.Leave(t)
		return serve(h, w, r)
	}
}

// edgeRefusal is the answer to a request the edge refused: 413 as the
// body reader would answer an over-cap body, else 503 overloaded (writeError
// adds Retry-After), as Options.Admission's refusal.
func edgeRefusal(reason admission.Reason, maxBytes int64) *apiError {
	if reason == admission.ReasonBodyTooLarge {
		return tooLarge(maxBytes)
	}
	return &apiError{status: http.StatusServiceUnavailable, reason: api.ReasonOverloaded,
		msg: "overloaded (" + reason.String() + "): refused before reading the body; retry later"}
}
