//go:build !race

// Several members in one process: see members_test.go for why not -race.

package clusterindex

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/bench/chaos"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// engine is one simulated engine, its prompts, and the member whose
// pipeline listens to it.
type simEngine struct {
	eng  *simengine.Engine
	drv  *simengine.RandomDriver
	cfg  listener.Config
	host int
	// prompts it served, for queries.
	prompts [][]uint32
}

func newSimEngine(t *testing.T, id int, host int, replayBuffer int) *simEngine {
	t.Helper()
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		BlockSize: 4, CapacityBlocks: 48, ReplayBuffer: replayBuffer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	drv, err := simengine.NewRandomDriver(simengine.RandomConfig{Seed: uint64(id), BlockSize: 4, Prefixes: 4,
		MaxPrefixBlocks: 10, MaxSuffixTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	return &simEngine{eng: eng, drv: drv, host: host, cfg: listener.Config{Stream: messages.StreamID{Worker: messages.WorkerID(id)},
		Engine: "vllm", Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(), BlockSize: 4, Silence: -1,
		ReplayTimeout: 500 * time.Millisecond}}
}

func (e *simEngine) serve(t *testing.T, n int) {
	t.Helper()
	for range n {
		p, err := e.drv.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.eng.ServeRequest(simengine.Request{Tokens: p.Tokens}); err != nil {
			t.Fatal(err)
		}
		e.prompts = append(e.prompts, p.Tokens)
	}
}

func (e *simEngine) truth() chaos.Truth {
	// The buffer holds the history when it still has the first batch.
	return chaos.Truth{Stream: e.cfg.Stream, Held: e.eng.Contents().Held(), HistoryHeld: e.eng.Options().ReplayBuffer > int(e.eng.Stats().NextSeq)}
}

// quiesceAll waits until every engine's listener (on its host's pipeline)
// has delivered everything, finished replaying and been acknowledged, then
// orders a Stats read after every member's batches.
func quiesceAll(t *testing.T, pipes []*pipeline.Pipeline, live []int, es []*simEngine) {
	t.Helper()
	for _, e := range es {
		if err := e.eng.Publish(); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range es {
		var last string
		waitFor(t, fmt.Sprintf("worker %d quiescent", e.cfg.Stream.Worker), func() bool {
			st, err := pipes[e.host].ListenerStats(e.cfg.Stream, time.Second)
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("%+v", st)
			return st.NextSeq == e.eng.Stats().NextSeq && !st.Replaying && st.InFlight == 0
		})
		_ = last
	}
	for _, i := range live {
		if _, err := pipes[i].IndexStats(wait); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTruth: every live member's snapshot equals the engines' caches by
// the chaos checker's rules, and every live member answers the engines'
// prompts identically, whole.
func checkTruth(t *testing.T, when string, pipes []*pipeline.Pipeline, live []int, es []*simEngine) {
	t.Helper()
	for _, i := range live {
		snap, err := pipes[i].Snapshot(wait)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			st, err := pipes[e.host].Status(wait)
			if err != nil {
				t.Fatal(err)
			}
			r := chaos.CheckStream(e.truth(), snap.Blocks[messages.WorkerKey{Worker: e.cfg.Stream.Worker}], st.Streams[e.cfg.Stream].State)
			if !r.OK() {
				t.Errorf("%s, member %d: %s", when, i, r)
			}
			if r.HistoryHeld && r.Held < 10 {
				t.Fatalf("%s: worker %d holds %d blocks: the test would prove little", when, e.cfg.Stream.Worker, r.Held)
			}
		}
	}
	var h blockhash.Hasher
	for _, e := range es {
		for _, p := range e.prompts[len(e.prompts)-3:] {
			raw := h.Hash(nil, p, 4, blockhash.Options{})
			q := &indexer.QueryRequest{Options: allOptions}
			for _, v := range raw {
				q.Hashes = append(q.Hashes, messages.LocalHash(v))
			}
			var first *indexer.QueryResult
			for _, i := range live {
				res, cov, err := pipes[i].QueryCoverage(q, time.Second)
				if err != nil || cov.Partial() {
					t.Fatalf("%s, member %d: query %v, coverage %+v", when, i, err, cov)
				}
				res.Scores = canonical(res.Scores)
				if first == nil {
					first = res
				} else if !slices.Equal(res.Scores, first.Scores) || !slices.Equal(res.Frequencies, first.Frequencies) {
					t.Fatalf("%s: member %d answers %+v, member %d %+v", when, i, res, live[0], first)
				}
			}
		}
	}
}

// whole waits until every shard answers, none recovering (the first
// activations rebuild too: a shard cannot tell new from lost).
func whole(t *testing.T, p *pipeline.Pipeline) {
	t.Helper()
	waitFor(t, "every shard answers whole", func() bool {
		_, cov, err := p.QueryCoverage(&indexer.QueryRequest{Hashes: []messages.LocalHash{1}}, time.Second)
		return err == nil && !cov.Partial()
	})
}

// TestHostLossRebuildsSlices: three members, each with a pipeline whose
// index is the cluster index, six simulated engines registered through
// different members (one with a replay buffer too small to hold its
// history). The index equals the engines' caches on every member. One
// member leaves with its pipeline; its shards re-activate on the
// survivors, the survivors' listeners rebuild the streams those shards
// held from the engines' replay buffers (a stream only the lost member
// listened to is dropped as an orphan until it is registered again), and
// after quiescence every survivor's index equals the engines' caches again
// — never a block the engine evicted, missing ones only on the stream
// flagged degraded.
func TestHostLossRebuildsSlices(t *testing.T) {
	t.Parallel()
	cfg := Config{Shards: 6, QueryDeadline: time.Second}
	nodes := []*Node{NewNode(cfg), NewNode(cfg), NewNode(cfg)}
	ms := startMembers(t, "ci-rebuild", nodes[0].Join, nodes[1].Join, nodes[2].Join)
	pipes := make([]*pipeline.Pipeline, len(ms))
	for i, m := range ms {
		p, err := pipeline.Start(m.Cluster.ActorSystem, pipeline.Config{NewIndex: nodes[i].NewIndex, Namespace: namespace})
		if err != nil {
			t.Fatal(err)
		}
		pipes[i] = p
	}
	defer func() {
		for _, p := range pipes {
			if p != nil {
				p.Stop()
			}
		}
	}()
	// The member to lose owns the most shards (placement depends on the
	// members' random ports). Worker ids are picked so that a survivor
	// listens to a stream placed on it (to be rebuilt) and it listens to
	// one placed elsewhere (to be orphaned).
	// Each index learns the topology a moment after its member does: wait
	// until the three agree on every shard's owner and more than one
	// member owns shards.
	eventually.True(t, "indexes agree on a spread placement", func() (bool, string) {
		seen := map[string]bool{}
		for shard := range cfg.Shards {
			o := nodes[0].regs[0].index.Owner(shard)
			seen[o] = true
			for i, n := range nodes[1:] {
				if other := n.regs[0].index.Owner(shard); other != o {
					return false, fmt.Sprintf("shard %d: member 0 says %s, member %d says %s", shard, o, i+1, other)
				}
			}
		}
		return len(seen) > 1, fmt.Sprintf("owners %v", seen)
	})
	owners := map[string]int{}
	for shard := range cfg.Shards {
		owners[nodes[0].regs[0].index.Owner(shard)]++
	}
	victim := 0
	for i, m := range ms {
		if owners[m.Address()] > owners[ms[victim].Address()] {
			victim = i
		}
	}
	if n := owners[ms[victim].Address()]; n == cfg.Shards {
		t.Fatalf("member %d owns all %d shards; the test needs them spread", victim, n)
	}
	onVictim := func(w int) bool {
		return nodes[0].regs[0].index.Owner(indexer.ShardOf(messages.WorkerID(w), cfg.Shards)) == ms[victim].Address()
	}
	var es []*simEngine
	next := 0
	pick := func(ok func(int) bool) int {
		for next++; !ok(next); next++ {
		}
		return next
	}
	anyID := func(int) bool { return true }
	for slot := range 6 {
		host := slot % 3
		want := anyID
		switch {
		case slot < 3 && host != victim:
			want = onVictim // rebuilt
		case slot < 3:
			want = func(w int) bool { return !onVictim(w) } // orphaned
		}
		buffer := 10000
		if slot == 4 {
			buffer = 3 // loses its history: rebuilt degraded
		}
		es = append(es, newSimEngine(t, pick(want), host, buffer))
	}
	for _, e := range es {
		if err := pipes[e.host].AddListener(e.cfg); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range es {
		waitFor(t, "subscribed", func() bool {
			st, err := pipes[e.host].ListenerStats(e.cfg.Stream, time.Second)
			return err == nil && st.Subscribed > 0
		})
		e.serve(t, 25)
	}
	all := []int{0, 1, 2}
	whole(t, pipes[0])
	quiesceAll(t, pipes, all, es)
	checkTruth(t, "three members", pipes, all, es)

	var rebuilt []*simEngine // survivors' engines whose shard is lost
	orphan := es[victim]
	for _, e := range es {
		if e.host != victim && onVictim(int(e.cfg.Stream.Worker)) {
			rebuilt = append(rebuilt, e)
		}
	}
	pipes[victim].Stop()
	pipes[victim] = nil
	shutdown(ms[victim])
	survivors := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == victim })
	for _, e := range es {
		e.serve(t, 10) // traffic goes on while the slices rebuild
	}
	// The lost member's engines are registered again through a survivor
	// (as a gateway retrying its registration would) — but the orphan: its
	// stream is dropped from the index, never left stale.
	for _, e := range es {
		if e.host == victim && e != orphan {
			e.host = survivors[int(e.cfg.Stream.Worker)%2]
			if err := pipes[e.host].AddListener(e.cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	x := pipes[survivors[0]]
	whole(t, x)
	for _, e := range es {
		e.serve(t, 5)
	}
	kept := slices.DeleteFunc(slices.Clone(es), func(e *simEngine) bool { return e == orphan })
	quiesceAll(t, pipes, survivors, kept)
	checkTruth(t, "after the host loss", pipes, survivors, kept)
	for _, i := range survivors {
		snap, err := pipes[i].Snapshot(wait)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(snap.Blocks[messages.WorkerKey{Worker: orphan.cfg.Stream.Worker}]); n > 0 || len(orphan.truth().Held) == 0 {
			t.Fatalf("member %d: the orphaned stream of worker %d keeps %d blocks (engine %d)", i, orphan.cfg.Stream.Worker, n, len(orphan.truth().Held))
		}
	}
	for _, e := range rebuilt {
		st, err := pipes[e.host].ListenerStats(e.cfg.Stream, time.Second)
		if err != nil || st.Rebuilds == 0 {
			t.Errorf("worker %d (shard %d, lost): no rebuild asked of its listener (%v, %v)", e.cfg.Stream.Worker,
				indexer.ShardOf(e.cfg.Stream.Worker, cfg.Shards), st, err)
		}
	}
}
