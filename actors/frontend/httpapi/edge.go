package httpapi

import (
	"net/http"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages/api"
)

// edged puts an endpoint of the table behind Options.Edge: the request is
// admitted or refused from its headers (after authorize, before serve
// reads the body), and its slot is freed however serve returns — an
// error, a client that went away, a panic wrap recovers. A 503 goes out
// without waiting for the body to arrive (admission.AnswerUnread); an
// over-cap Content-Length is answered 413 as the body reader would answer
// it. The endpoint's name in the edge's metrics is its route pattern.
func edged(serve func(h *Handler, w *responseWriter, r *http.Request) error) func(h *Handler, w *responseWriter, r *http.Request) error {
	return func(h *Handler, w *responseWriter, r *http.Request) error {
		t, reason := h.opts.Edge.Enter(r.Context(), r.Pattern, h.opts.MaxBodyBytes, r.ContentLength)
		switch reason {
		case admission.ReasonNone:
		case admission.ReasonBodyTooLarge: // net/http closes the connection on a large unread body
			return tooLarge(h.opts.MaxBodyBytes)
		default:
			admission.AnswerUnread(w, r, func() { h.writeError(w, edgeOverloaded(reason)) })
			return nil
		}
		defer h.opts.Edge.Leave(t)
		return serve(h, w, r)
	}
}

// edgeOverloaded is the answer to a request the edge refused for load: 503
// overloaded (writeError adds Retry-After), as Options.Admission's refusal.
func edgeOverloaded(reason admission.Reason) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, reason: api.ReasonOverloaded,
		msg: "overloaded (" + reason.String() + "): refused before reading the body; retry later"}
}
