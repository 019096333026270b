package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

func parseCluster(t *testing.T, args ...string) *clusterFlags {
	t.Helper()
	fs := cli.NewFlags("kvrouter serve", "", io.Discard)
	c := addClusterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterFlags: without --cluster nothing is joined; a bad
// combination is refused with a reason; --cluster with the in-process
// provider gives a host whose index factory answers within the route
// deadline, whole once its shards settle.
func TestClusterFlags(t *testing.T) {
	if cc, err := parseCluster(t).config(); cc != nil || err != nil {
		t.Fatalf("without --cluster: config %+v, err %v", cc, err)
	}
	for args, want := range map[string]string{
		"--cluster c --route-deadline 0":             "must be positive",
		"--cluster c":                                "--etcd-endpoints", // etcd by default
		"--cluster c --cluster-provider automanaged": "peers",
		"--cluster c --cluster-provider nope":        "unknown cluster provider",
	} {
		cc, err := parseCluster(t, strings.Fields(args)...).config()
		if err == nil {
			var h *service.Host
			if h, err = service.StartHost(actor.NewActorSystem(), service.HostConfig{Cluster: cc}); err == nil {
				h.Close()
				h.Leave()
			}
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one mentioning %q", args, err, want)
		}
	}

	system := actor.NewActorSystem()
	cc, err := parseCluster(t, "--cluster", "dev", "--cluster-provider", "test", "--cluster-shards", "3",
		"--route-deadline", "2s").config()
	if err != nil {
		t.Fatal(err)
	}
	h, err := service.StartHost(system, service.HostConfig{Cluster: cc, Service: service.Config{BlockSize: 16, Routing: routing.DefaultConfig()}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Leave()
	defer h.Close()
	if h.Node == nil || h.Node.Registry() == nil || h.Node.Registry().Self() == "" {
		t.Fatal("--cluster: no registry replica joined")
	}
	p, err := pipeline.Start(system, pipeline.Config{NewIndex: h.Node.NewIndex})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	eventually.True(t, "the cluster index answers whole", func() (bool, string) {
		_, cov, err := p.QueryCoverage(&indexer.QueryRequest{Hashes: []messages.LocalHash{1}}, 5*time.Second)
		return err == nil && cov.Shards == 3 && !cov.Partial(), fmt.Sprintf("%+v, %v", cov, err)
	})
}

// serve's --worker workers register in serve's namespace, with their
// engine= when given (an unknown one is refused); bind and topic= pass
// through, and by-topic registers this --worker as one pod of a shared
// socket: exactly one pod=POD, no other worker id.
func TestServeWorkerFlags(t *testing.T) {
	var flags workerFlags
	if err := flags.Set("2:1=tcp://127.0.0.1:3,replay=tcp://127.0.0.1:4,serving=127.0.0.1:8000"); err != nil {
		t.Fatal(err)
	}
	regs, err := registrations(flags, "m", "t")
	if err != nil {
		t.Fatal(err)
	}
	want := api.Registration{InstanceID: 2, DpRank: 1, Endpoint: "tcp://127.0.0.1:3", ReplayEndpoint: "tcp://127.0.0.1:4",
		ServingEndpoint: "127.0.0.1:8000", ModelName: "m", TenantID: "t"}
	if len(regs) != 1 || regs[0] != want {
		t.Fatalf("registrations %+v, want [%+v]", regs, want)
	}
	if err := flags.Set("3=tcp://127.0.0.1:5,engine=sglang"); err != nil {
		t.Fatal(err)
	}
	if regs, err = registrations(flags, "m", "t"); err != nil || len(regs) != 2 || regs[1].Engine != "sglang" {
		t.Fatalf("engine=sglang: %+v, %v", regs, err)
	}
	if err := flags.Set("5=tcp://127.0.0.1:6,engine=llamacpp"); err == nil || !strings.Contains(err.Error(), "unknown engine") {
		t.Errorf("engine=llamacpp: err %v, want unknown engine", err)
	}
	var shared workerFlags
	_ = shared.Set("4=tcp://127.0.0.1:5,bind,topic=kv@,by-topic,pod=10.0.0.4:8000")
	regs, err = registrations(shared, "m", "t")
	if err != nil || len(regs) != 1 || !regs[0].Bind || regs[0].Topic != "kv@" || regs[0].TopicPod != "10.0.0.4:8000" {
		t.Errorf("bind,topic=,by-topic,pod=POD: %+v, %v", regs, err)
	}
	for _, bad := range []string{"6=tcp://127.0.0.1:5,bind,by-topic", "6=tcp://127.0.0.1:5,bind,by-topic,pod=10.0.0.4:8000=7",
		"6=tcp://127.0.0.1:5,bind,by-topic,pod=10.0.0.4:8000,pod=10.0.0.5:8000"} {
		var f workerFlags
		if err := f.Set(bad); err != nil {
			t.Fatalf("%s: %v", bad, err)
		}
		if _, err := registrations(f, "m", "t"); err == nil || !strings.Contains(err.Error(), "pod=POD") {
			t.Errorf("%s: err %v, want it refused asking for pod=POD", bad, err)
		}
	}
}
