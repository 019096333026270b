package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func parseGuardFlags(t *testing.T, args ...string) (*guardFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addGuardFlags(fs)
	return f, fs.Parse(args)
}

// Flow control is on by default; the objectives come from an
// InferenceObjective list (this pool's) and --objective; bad values are
// refused with the flag's name.
func TestFlowFlags(t *testing.T) {
	f, err := parseGuardFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.flow.config("")
	if err != nil || cfg == nil || cfg.TTL != requestpath.DefaultFlowTTL || cfg.NoEndpointTTL != 0 || len(cfg.Objectives) != 0 {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	file := filepath.Join(t.TempDir(), "objectives.json")
	if err := os.WriteFile(file, []byte(`{"kind":"List","items":[
	  {"kind":"InferenceObjective","metadata":{"name":"chat"},"spec":{"priority":5,"poolRef":{"name":"pool"}}},
	  {"kind":"InferenceObjective","metadata":{"name":"theirs"},"spec":{"priority":9,"poolRef":{"name":"other"}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = parseGuardFlags(t, "--inference-objectives", file, "--objective", "batch=-1", "--objective", "gold=100",
		"--flow-ttl", "5s", "--no-endpoint-ttl", "20s", "--flow-max-requests", "7", "--flow-max-bytes", "4096",
		"--flow-headroom-blocks", "4", "--flow-reserve-workers", "2")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = f.flow.config("pool")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"chat": 5, "batch": -1, "gold": 100}; !maps.Equal(cfg.Objectives, want) {
		t.Fatalf("objectives %v, want %v", cfg.Objectives, want)
	}
	if cfg.TTL != 5*time.Second || cfg.NoEndpointTTL != 20*time.Second || cfg.MaxRequests != 7 || cfg.MaxBytes != 4096 ||
		cfg.Headroom != 4 || cfg.ReserveWorkers != 2 {
		t.Fatalf("config %+v", cfg)
	}
	if g, err := f.build("ns/pool", ""); err != nil || g == nil {
		t.Fatalf("build: %v", err)
	}
	f, _ = parseGuardFlags(t, "--no-flow-control")
	if cfg, err := f.flow.config(""); cfg != nil || err != nil {
		t.Fatalf("--no-flow-control: %+v, %v", cfg, err)
	}
	for _, args := range [][]string{{"--objective", "x"}, {"--objective", "x=high"}, {"--objective", "x=1", "--objective", "x=2"}} {
		if _, err := parseGuardFlags(t, args...); err == nil {
			t.Errorf("%v: parsed", args)
		}
	}
	for _, args := range [][]string{{"--flow-ttl", "0s"}, {"--no-endpoint-ttl", "-1s"}, {"--flow-max-requests", "0"}, {"--flow-interval", "0s"}, {"--flow-reserve-workers", "-1"},
		{"--inference-objectives", filepath.Join(t.TempDir(), "missing.json")}, {"--inference-objectives", file, "--objective", "chat=1"}} {
		f, err := parseGuardFlags(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.build("ns/pool", ""); err == nil {
			t.Errorf("%v: built", args)
		}
	}
}

type fakeWorkers []api.WorkerInfo

func (f fakeWorkers) Workers(context.Context) ([]api.WorkerInfo, error) { return f, nil }

// serve's guard loops: with --health-checks the registered serving
// endpoints are checked at once and every interval; one answering 503
// leaves the candidates (here after one failure); the loops end with ctx.
func TestGuardFlagsRunHealthChecks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	hp := strings.TrimPrefix(srv.URL, "http://")
	f, err := parseGuardFlags(t, "--health-checks", "--health-check-path", "/ready", "--health-failures", "1", "--health-check-interval", "1h")
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.build("", "")
	if err != nil {
		t.Fatal(err)
	}
	ws := fakeWorkers{{InstanceID: 1, Ranks: []api.RankInfo{{ServingEndpoint: "http://" + hp}, {ServingEndpoint: "not an endpoint"}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		f.run(ctx, g, ws, nil, slog.New(slog.DiscardHandler))
		close(done)
	}()
	eventually.True(t, "the endpoint answering 503 out", func() (bool, string) {
		h := g.RankHealth(api.RankInfo{ServingEndpoint: hp})
		return h != nil && !h.Healthy && h.LastError == "status 503", fmt.Sprint(h)
	})
	cancel()
	<-done
	for _, args := range [][]string{{"--health-checks", "--health-check-timeout", "10s", "--health-check-interval", "5s"},
		{"--health-checks", "--health-failures", "0"}, {"--health-checks", "--health-check-path", "health"}} {
		f, _ := parseGuardFlags(t, args...)
		if _, err := f.build("", ""); err == nil {
			t.Errorf("%v: built", args)
		}
	}
}

// kvrouter serve refuses a bad flow-control or health-check flag before
// it starts anything, and --help names them.
func TestServeGuardFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--flow-ttl", "0s"}, {"--objective", "x=y"}, {"--health-checks", "--health-successes", "0"}} {
		var out, errb strings.Builder
		if code := run(append([]string{"serve"}, args...), nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), args[len(args)-2]) {
			t.Errorf("serve %v: exit %d, stderr:\n%s", args, code, errb.String())
		}
	}
	var out, errb strings.Builder
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, name := range []string{"-no-flow-control", "-objective", "-inference-objectives", "-no-endpoint-ttl", "-flow-reserve-workers", "-health-checks", "-health-check-path"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("serve --help does not name %s", name)
		}
	}
}

// --watch-inference-objectives: the pool's objectives in the cluster give
// their bands as they change; other pools' are left out; --objective wins.
func TestWatchInferenceObjectivesFlag(t *testing.T) {
	f, err := parseGuardFlags(t, "--watch-inference-objectives", "--objective", "fixed=7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.build("ns/pool", ""); err == nil {
		t.Fatal("built without --discover kubernetes")
	}
	g, err := f.build("ns/pool", "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	obj := func(name, pool string, priority int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferenceObjective",
			"metadata": map[string]any{"namespace": "ns", "name": name},
			"spec":     map[string]any{"priority": priority, "poolRef": map[string]any{"name": pool}}}}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{kube.ObjectiveResource: "InferenceObjectiveList"},
		obj("chat", "pool", 10), obj("theirs", "other", 50), obj("fixed", "pool", 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.flow.watchObjectives(ctx, g, &kube.Config{Dynamic: dyn, Namespace: "ns", Pool: "pool"}, slog.New(slog.DiscardHandler))
	eventually.True(t, "the cluster's objectives in force", func() (bool, string) {
		return g.Band("chat") == 10 && g.Band("fixed") == 7 && g.Band("theirs") == 0, fmt.Sprint(g.Band("chat"), g.Band("fixed"), g.Band("theirs"))
	})
	if _, err := dyn.Resource(kube.ObjectiveResource).Namespace("ns").Update(ctx, obj("chat", "pool", -1), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the update in force", func() (bool, string) { return g.Band("chat") == -1, fmt.Sprint(g.Band("chat")) })
	bad, _ := parseGuardFlags(t, "--inference-objectives-resource", "inferenceobjectives")
	if _, err := bad.build("", ""); err == nil {
		t.Fatal("a resource without group and version built")
	}
}
