package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
)

// edgeFlags are serve's edge admission: requests taken or refused from
// their headers, before their bodies are read (package admission, edge.go).
type edgeFlags struct {
	maxInFlight int
	maxBytes    int64
}

func addEdgeFlags(fs *flag.FlagSet) *edgeFlags {
	f := &edgeFlags{}
	fs.IntVar(&f.maxInFlight, "edge-max-inflight", admission.DefaultEdgeInFlight(),
		fmt.Sprintf("requests in flight at most on POST /route, /select_and_reserve and the proxy's POSTs together; past it one is answered before its body is read: 503 overloaded with Retry-After (429 on the proxy). Default %d a core (GOMAXPROCS): what a core answers in the route deadline; 0: no cap", admission.DefaultEdgeInFlightPerCore))
	fs.Int64Var(&f.maxBytes, "edge-max-inflight-bytes", admission.DefaultEdgeBytesInFlight,
		"declared body bytes (Content-Length; a chunked /route body counts the body cap) in flight at most on the same endpoints; 0: no cap. A request arriving with nothing in flight is always taken")
	return f
}

// build checks the flags and returns the edge, whose overload state is
// gate's.
func (f *edgeFlags) build(gate *admission.Gate, logger *slog.Logger) (*admission.Edge, error) {
	if f.maxInFlight < 0 || f.maxBytes < 0 {
		return nil, fmt.Errorf("--edge-max-inflight %d, --edge-max-inflight-bytes %d: want 0 (no cap) or more", f.maxInFlight, f.maxBytes)
	}
	return admission.NewEdge(admission.EdgeConfig{EdgeLimits: admission.EdgeLimits{MaxInFlight: f.maxInFlight, MaxBytesInFlight: f.maxBytes},
		Overloaded: gate.Full, Logger: logger}), nil
}

// edgeProxy puts the proxy's POSTs (its completions) behind edge; its
// other requests (models, probes) pass. The proxy's own reader caps the
// body, so the edge checks no size there (a chunked body is charged
// nothing). A refusal is the proxy's answer to a shed: 429 overloaded in
// OpenAI's error shape.
func edgeProxy(edge *admission.Edge, next http.Handler) http.Handler {
	edged := edge.Handler("proxy", 0, next, func(w http.ResponseWriter, _ *http.Request, reason admission.Reason) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"message": "overloaded (" + reason.String() + "): refused before reading the body; retry later",
			"type":    "rate_limit_error", "code": "overloaded"}})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		edged.ServeHTTP(w, r)
	})
}
