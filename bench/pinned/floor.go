package pinned

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// floorAnswer is the floor's fixed answer, the size of a small /route one.
const floorAnswer = `{"worker_id":1,"dp_rank":0,"overlap_blocks":0,"cached_tokens":0}`

// floorBody is what the floor decodes: /route's body fields.
type floorBody struct {
	TokenIDs  []uint32 `json:"token_ids"`
	ModelName string   `json:"model_name"`
	TenantID  string   `json:"tenant_id"`
	SessionID string   `json:"session_id"`
	RequestID string   `json:"request_id"`
}

// maxFloorBody caps a floor request body (kvrouter's default cap is
// about 12 MiB).
const maxFloorBody = 16 << 20

// FloorHandler is the floor's route handler: a plain net/http handler that
// checks the method and content type, decodes the /route JSON body with
// encoding/json and answers a fixed small JSON. Whatever the router does
// past this is its own cost.
func FloorHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /route", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			http.Error(w, `{"error":"content type"}`, http.StatusUnsupportedMediaType)
			return
		}
		var b floorBody
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxFloorBody)).Decode(&b); err != nil || len(b.TokenIDs) == 0 {
			http.Error(w, `{"error":"bad body"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(floorAnswer))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

// ServeFloor serves FloorHandler on addr until ctx ends.
func ServeFloor(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: FloorHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
