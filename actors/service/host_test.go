package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages/api"
)

func hostConfig(st Startup) HostConfig {
	return HostConfig{Startup: st, Service: Config{BlockSize: 16, Routing: routing.DefaultConfig(), Timeout: time.Second}}
}

// A host registers its startup workers, the worker file's first; a bad
// file or peer fails the start, naming what is wrong.
func TestStartHostRegistersWorkers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "workers.json")
	if err := os.WriteFile(file, []byte(`[{"instance_id":1,"endpoint":"tcp://127.0.0.1:1","model_name":"m"},
		{"instance_id":1,"dp_rank":1,"endpoint":"tcp://127.0.0.1:2","model_name":"m"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := StartHost(actor.NewActorSystem(), hostConfig(Startup{WorkersFile: file, Workers: []api.Registration{
		{InstanceID: 2, Endpoint: "tcp://127.0.0.1:3", ReplayEndpoint: "tcp://127.0.0.1:4", ServingEndpoint: "127.0.0.1:8000",
			ModelName: "m", TenantID: "default"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Leave()
	defer h.Close()
	if h.Node != nil {
		t.Error("a host without a cluster config has a cluster member")
	}
	ws, err := h.Service.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || len(ws[0].Ranks) != 2 || ws[1].InstanceID != 2 {
		t.Fatalf("registered %+v, want worker 1 with 2 ranks and worker 2", ws)
	}
	if got := ws[1].Ranks[0].ServingEndpoint; got != "127.0.0.1:8000" {
		t.Errorf("worker 2 serves at %q, want 127.0.0.1:8000", got)
	}

	twice := api.Registration{InstanceID: 4, Endpoint: "tcp://127.0.0.1:5", ModelName: "m", TenantID: "default"}
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`[{"instance_id":3}]`), 0o600)
	for name, tc := range map[string]struct {
		st   Startup
		want string
	}{
		"missing file": {Startup{WorkersFile: filepath.Join(dir, "nope.json")}, "worker file"},
		"bad file":     {Startup{WorkersFile: bad}, "entry 0"},
		"worker twice": {Startup{Workers: []api.Registration{twice, twice}}, "worker 4 rank 0"},
		"bad peer":     {Startup{BootstrapFrom: "localhost:1"}, "bootstrap from localhost:1"},
	} {
		h, err := StartHost(actor.NewActorSystem(), hostConfig(tc.st))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to mention %q", name, err, tc.want)
		}
		if h != nil {
			t.Errorf("%s: a failed start returned a host", name)
		}
	}
}
