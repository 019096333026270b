package httpapi

import (
	"net/http"

	"github.com/kvrouter/kvrouter/messages/api"
)

// Dynamo's standalone indexer's peer endpoints and its bare health probe,
// answered with its shapes and statuses (doc.go, "Dynamo drop-in"):
//
//	POST /register_peer   {"url": "http://peer:8090"} → 201 {"status": "ok"}
//	POST /deregister_peer {"url": …} → 200 {"status": "ok"}; unknown → 404
//	GET  /peers           → 200 ["http://peer:8090", …] (sorted)
//	GET  /health          → 200, empty body

// peerBody is the body of /register_peer and /deregister_peer.
type peerBody struct {
	URL *string `json:"url"`
}

func (b *peerBody) peer(limits) (string, *apiError) {
	var f fields
	u := f.name("url", b.URL)
	return u, f.err
}

func (h *Handler) registerPeer(w *responseWriter, r *http.Request) error {
	return command(h, w, r, (*peerBody).peer, api.Backend.RegisterPeer, http.StatusCreated)
}

func (h *Handler) deregisterPeer(w *responseWriter, r *http.Request) error {
	return command(h, w, r, (*peerBody).peer, api.Backend.DeregisterPeer, http.StatusOK)
}

func (h *Handler) peers(w *responseWriter, r *http.Request) error {
	list, err := h.backend.Peers(r.Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []string{}
	}
	h.writeJSON(w, http.StatusOK, list)
	return nil
}

// health answers as Dynamo's standalone indexer does: 200 and nothing
// else (its clients probe the status only). /healthz says {"status": "ok"}.
func (h *Handler) health(w *responseWriter, _ *http.Request) error {
	w.WriteHeader(http.StatusOK)
	return nil
}
