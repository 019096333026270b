package pipeline

import (
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
)

// coveringIndex wraps the local index and claims shard 1 of 2 recovering.
type coveringIndex struct{ *indexer.Index }

func (c coveringIndex) QueryCoverage(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, Coverage, error) {
	res, err := c.Query(q, timeout)
	return res, Coverage{Shards: 2, Recovering: []int{1}}, err
}

// TestNewIndexFactory: Config.NewIndex starts the index with the
// namespace, the followers (the session index) and a live view of the
// listeners; QueryCoverage passes
// a covering index's coverage through and calls the local index whole.
func TestNewIndexFactory(t *testing.T) {
	var env IndexEnv
	p := mustStart(t, Config{Namespace: "m/t", NewIndex: func(e IndexEnv) Index {
		env = e
		return coveringIndex{indexer.Spawn(e.Root, indexer.Config{Shards: 2}, e.Followers...)}
	}})
	if env.Namespace != "m/t" || len(env.Followers) != 1 || env.Followers[0] != p.sessions || env.Root == nil {
		t.Fatalf("env %+v: want the namespace and the session index as the one follower", env)
	}
	stream := messages.StreamID{Worker: 5}
	if err := p.AddListener(listener.Config{Stream: stream, Endpoint: freeEndpoint(t), Silence: -1}); err != nil {
		t.Fatal(err)
	}
	ls := env.Listeners()
	if len(ls) != 1 || ls[stream] == nil {
		t.Fatalf("listeners %v, want worker 5's", ls)
	}
	delete(ls, stream) // a copy
	if len(env.Listeners()) != 1 {
		t.Fatal("Listeners returned the pipeline's own map")
	}
	_, cov, err := p.QueryCoverage(&indexer.QueryRequest{Hashes: []messages.LocalHash{1}}, time.Second)
	if err != nil || !cov.Partial() || !slices.Equal(cov.Recovering, []int{1}) {
		t.Fatalf("coverage %+v, %v", cov, err)
	}
	for w := range messages.WorkerID(20) {
		if cov.RecoveringWorker(w) != (indexer.ShardOf(w, 2) == 1) || cov.MissingWorker(w) {
			t.Fatalf("worker %d: recovering %v missing %v", w, cov.RecoveringWorker(w), cov.MissingWorker(w))
		}
	}
	local := mustStart(t, Config{})
	if _, cov, err := local.QueryCoverage(&indexer.QueryRequest{Hashes: []messages.LocalHash{1}}, time.Second); err != nil || cov.Partial() {
		t.Fatalf("local index: coverage %+v, %v; want whole", cov, err)
	}
}
