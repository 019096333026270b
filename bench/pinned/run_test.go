package pinned

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// floorEnv makes this test binary the floor server (the harness appends
// --http ADDR), as kvrouter-bench floor-server is in a real run.
const floorEnv = "PINNED_TEST_FLOOR"

func TestMain(m *testing.M) {
	if os.Getenv(floorEnv) == "1" {
		addr := os.Args[len(os.Args)-1]
		if err := ServeFloor(context.Background(), addr); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The whole harness at a tiny rate: 2 engine processes, the floor and
// kvrouter serve each measured for a second, pinned when taskset and two
// cores are there.
func TestRunEndToEnd(t *testing.T) {
	bin := buildRouter(t)
	cfg := DefaultConfig()
	cfg.KVRouter = bin
	cfg.Floor = []string{"env", floorEnv + "=1", os.Args[0]}
	cfg.Rates, cfg.Ingest, cfg.Engines, cfg.Capacity = []float64{100}, []float64{5000}, 2, 1024
	cfg.Warmup, cfg.Duration, cfg.Fill, cfg.FillTimeout = 100*time.Millisecond, time.Second, 0.5, 30*time.Second
	cfg.Pin = runtime.NumCPU() >= 2
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.Points) != 1 || len(rep.Fill) != 1 {
		t.Fatalf("points %d, fills %d, want 1 each", len(rep.Points), len(rep.Fill))
	}
	p := rep.Points[0]
	for name, st := range map[string]Stats{"floor": p.Floor, "kvrouter": p.Router} {
		if st.Scheduled != 100 || st.OK == 0 || st.OK+st.Errors != st.Scheduled || st.Latency.N != st.OK {
			t.Errorf("%s: %+v, want the 100 scheduled requests of the measured second accounted for", name, st)
		}
	}
	if p.Floor.Errors != 0 {
		t.Errorf("the floor failed requests: %v", p.Floor.ErrorKinds)
	}
	if rep.Fill[0] <= 0 || p.RouterIngest <= 0 {
		t.Errorf("index fill %v, engines' ingest %v blocks/s: the router saw no blocks", rep.Fill[0], p.RouterIngest)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "kvrouter p50") || !strings.Contains(table.String(), "×p99") {
		t.Errorf("table:\n%s", table.String())
	}
}

// The bodies are the engines' prompts: the first carries the token ids
// the trace driver gives its first request with the same expansion.
func TestBodiesAreTheEnginesPrompts(t *testing.T) {
	bodies, err := routeBodies("builtin:conversation", 16, 3, "default")
	if err != nil {
		t.Fatal(err)
	}
	d, err := simengine.OpenTrace("builtin:conversation", simengine.TraceConfig{TokensPerBlock: 16, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	first, err := d.Next()
	if err != nil {
		t.Fatal(err)
	}
	var b floorBody
	if err := json.Unmarshal(bodies[0], &b); err != nil {
		t.Fatal(err)
	}
	if b.ModelName != "default" || len(b.TokenIDs) != len(first.Tokens) || b.TokenIDs[0] != first.Tokens[0] || len(bodies) < 10000 {
		t.Errorf("%d bodies; first: model %q, %d tokens, want %d", len(bodies), b.ModelName, len(b.TokenIDs), len(first.Tokens))
	}
}

// The floor decodes the body and answers the fixed JSON; a bad body or
// content type is refused.
func TestFloorHandler(t *testing.T) {
	srv := httptest.NewServer(FloorHandler())
	defer srv.Close()
	for _, c := range []struct {
		ctype, body string
		want        int
	}{
		{"application/json", `{"model_name":"default","token_ids":[1,2,3]}`, http.StatusOK},
		{"application/json", `{"token_ids":[]}`, http.StatusBadRequest},
		{"application/json", `{"token_ids":[-1]}`, http.StatusBadRequest},
		{"text/plain", `{"token_ids":[1]}`, http.StatusUnsupportedMediaType},
	} {
		resp, err := http.Post(srv.URL+"/route", c.ctype, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || c.want == http.StatusOK && buf.String() != floorAnswer {
			t.Errorf("%s %s: %d %q, want %d", c.ctype, c.body, resp.StatusCode, buf.String(), c.want)
		}
	}
}

// buildRouter builds kvrouter into a temporary directory as the container
// image builds it (CGO_ENABLED=0, the build configuration the Makefile's
// non-race steps share, so the race run links it from packages already
// compiled) and returns the binary's path.
func buildRouter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvrouter")
	build := exec.Command("go", "build", "-o", bin, "github.com/kvrouter/kvrouter/cmd/kvrouter")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build kvrouter: %v\n%s", err, out)
	}
	return bin
}
