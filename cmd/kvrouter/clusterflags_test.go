package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/messages"
)

func parseCluster(t *testing.T, args ...string) *clusterFlags {
	t.Helper()
	fs := newFlags("serve", "", io.Discard)
	c := addClusterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterFlags: without --cluster nothing is joined; a bad
// combination is refused with a reason; --cluster with the in-process
// provider gives an index factory whose pipelines answer within the route
// deadline, whole once their shards settle.
func TestClusterFlags(t *testing.T) {
	j, err := parseCluster(t).start(actor.NewActorSystem())
	if j.newIndex != nil || j.registry != nil || err != nil {
		t.Fatalf("without --cluster: factory %v, registry %v, err %v", j.newIndex != nil, j.registry != nil, err)
	}
	j.leave()
	for args, want := range map[string]string{
		"--cluster c --route-deadline 0":             "must be positive",
		"--cluster c":                                "--etcd-endpoints", // etcd by default
		"--cluster c --cluster-provider automanaged": "peers",
		"--cluster c --cluster-provider nope":        "unknown cluster provider",
	} {
		_, err := parseCluster(t, strings.Fields(args)...).start(actor.NewActorSystem())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want one mentioning %q", args, err, want)
		}
	}

	system := actor.NewActorSystem()
	j, err = parseCluster(t, "--cluster", "dev", "--cluster-provider", "test", "--cluster-shards", "3",
		"--route-deadline", "2s").start(system)
	if err != nil {
		t.Fatal(err)
	}
	defer j.leave()
	if j.registry == nil || j.registry.Self() == "" {
		t.Fatal("--cluster: no registry replica joined")
	}
	p, err := pipeline.Start(system, pipeline.Config{NewIndex: j.newIndex})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, cov, err := p.QueryCoverage(&indexer.QueryRequest{Hashes: []messages.LocalHash{1}}, 5*time.Second)
		if err == nil && cov.Shards == 3 && !cov.Partial() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster index never answered whole: %+v, %v", cov, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
