package httpapi

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/fleetui"
	"github.com/kvrouter/kvrouter/messages/api"
)

// The fleet page (GET /ui, package fleetui) and the read endpoint it polls
// besides /workers, /loads (booked load per rank, selection.go) and
// /metrics: GET /decisions (the latest routing decisions). A Backend that
// is not an api.FleetReader answers it 404.

func (h *Handler) fleet() (api.FleetReader, error) {
	if f, ok := h.backend.(api.FleetReader); ok {
		return f, nil
	}
	return nil, &apiError{status: http.StatusNotFound, reason: api.ReasonNotFound, msg: "this router keeps no decisions to show"}
}

func (h *Handler) decisions(w *responseWriter, r *http.Request) error {
	f, err := h.fleet()
	if err != nil {
		return err
	}
	out, err := f.Decisions(r.Context())
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) ui(w *responseWriter, r *http.Request) error {
	workers, err := h.workerList(r.Context())
	if err != nil {
		return err
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuffer(buf)
	buf.Reset()
	if err := fleetui.Render(buf, fleetui.Page{Workers: workers, Now: time.Now()}); err != nil {
		return err // a template error: logged by mapError, answered 500
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	hd.Set("Content-Security-Policy", fleetui.CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if !w.head {
		_, _ = w.Write(buf.Bytes())
	}
	return nil
}
