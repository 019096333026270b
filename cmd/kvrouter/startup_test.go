package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/cmd/kvrouter/service"
)

func newService(t *testing.T) *service.Service {
	t.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// The worker file and --worker flags register their workers, file first;
// serve refuses --worker options it cannot honour and a bad file, naming
// what is wrong.
func TestStartupRegistersWorkers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "workers.json")
	if err := os.WriteFile(file, []byte(`[{"instance_id":1,"endpoint":"tcp://127.0.0.1:1","model_name":"m"},
		{"instance_id":1,"dp_rank":1,"endpoint":"tcp://127.0.0.1:2","model_name":"m"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := newService(t)
	var flags workerFlags
	if err := flags.Set("2=tcp://127.0.0.1:3,replay=tcp://127.0.0.1:4,serving=127.0.0.1:8000"); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := startup{workersFile: file, workers: flags, model: "m", tenant: "default"}
	if err := st.run(svc, log); err != nil {
		t.Fatal(err)
	}
	ws, err := svc.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || len(ws[0].Ranks) != 2 || ws[1].InstanceID != 2 {
		t.Fatalf("registered %+v, want worker 1 with 2 ranks and worker 2", ws)
	}
	if got := ws[1].Ranks[0].ServingEndpoint; got != "127.0.0.1:8000" {
		t.Errorf("--worker serving=: worker 2 serves at %q, want 127.0.0.1:8000", got)
	}

	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`[{"instance_id":3}]`), 0o600)
	var tapOnly workerFlags
	_ = tapOnly.Set("4=tcp://127.0.0.1:5,bind")
	for name, tc := range map[string]struct {
		st   startup
		want string
	}{
		"missing file":    {startup{workersFile: filepath.Join(dir, "nope.json")}, "--workers-file"},
		"bad file":        {startup{workersFile: bad}, "entry 0"},
		"tap-only option": {startup{workers: tapOnly}, "bind"},
		"bad peer":        {startup{bootstrapFrom: "localhost:1"}, "--bootstrap-from"},
	} {
		err := tc.st.run(newService(t), log)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", name, err, tc.want)
		}
	}
}
