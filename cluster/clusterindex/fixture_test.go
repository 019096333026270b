package clusterindex

import (
	"cmp"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

const (
	namespace = "org/model-a" // a '/' inside, as model names have
	workers   = 9
	wait      = 5 * time.Second // generous: -race, gRPC on loopback, 2 cores
)

// joiner starts one member in system: Node.Join, or a bare kind (kind).
type joiner func(system *actor.ActorSystem, cfg member.Config) (*member.Member, error)

// kind joins a member hosting k alone (no rebuild agent).
func kind(k *cluster.Kind) joiner {
	return func(system *actor.ActorSystem, cfg member.Config) (*member.Member, error) {
		cfg.Kinds = []*cluster.Kind{k}
		return member.Start(system, cfg)
	}
}

// startMembers starts one in-memory cluster member per joiner, in
// parallel, and waits until every member sees all of them. They leave
// (gracefully, in parallel) when the test ends, unless already shut down.
func startMembers(t testing.TB, name string, joiners ...joiner) []*member.Member {
	t.Helper()
	return startMembersWith(t, test.NewInMemAgent(), name, joiners...)
}

// startMembersWith is startMembers on a given in-memory agent (members
// started later on the same agent join the same cluster).
func startMembersWith(t testing.TB, agent *test.InMemAgent, name string, joiners ...joiner) []*member.Member {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ms := make([]*member.Member, len(joiners))
	errs := make([]error, len(joiners))
	var wg sync.WaitGroup
	for i, join := range joiners {
		wg.Go(func() {
			system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
			ms[i], errs[i] = join(system, member.Config{Name: name, Provider: member.ProviderTest, TestAgent: agent,
				GossipInterval: time.Hour}) // see GossipInterval's doc
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { shutdown(ms...) })
	waitFor(t, "every member sees the others", func() bool {
		for _, m := range ms {
			if tp := m.Topology(); tp == nil || len(tp.Members) != len(ms) {
				return false
			}
		}
		return true
	})
	return ms
}

var shutOnce sync.Map // *member.Member → struct{}

func shutdown(ms ...*member.Member) {
	var wg sync.WaitGroup
	for _, m := range ms {
		if _, done := shutOnce.LoadOrStore(m, struct{}{}); !done {
			wg.Go(m.Shutdown)
		}
	}
	wg.Wait()
}

// waitFor waits until ok holds (eventually.True).
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	eventually.True(t, what, func() (bool, string) { return ok(), "not yet" })
}

// streams generates random valid event streams for a few workers over a
// small tree of token paths (so workers share prefixes), with removes,
// clears and dense event ids per worker.
type streams struct {
	rng  *rand.Rand
	held map[messages.WorkerID][][]uint8
	ids  map[messages.WorkerID]uint64
}

func newStreams(seed uint64) *streams {
	return &streams{rng: rand.New(rand.NewPCG(seed, 1)), held: map[messages.WorkerID][][]uint8{}, ids: map[messages.WorkerID]uint64{}}
}

func local(p []uint8) messages.LocalHash {
	h := uint64(0x9e3779b97f4a7c15)
	for _, c := range p {
		h = (h ^ uint64(c+1)) * 0xbf58476d1ce4e5b9
	}
	return messages.LocalHash(h)
}

func engine(p []uint8, w messages.WorkerID) messages.ExternalHash {
	return messages.ExternalHash(uint64(local(p))*31 + uint64(w)*0x94d049bb133111eb)
}

func (g *streams) next(w messages.WorkerID) messages.RouterEvent {
	g.ids[w]++
	ev := messages.RouterEvent{WorkerID: w, Event: messages.KvCacheEvent{EventID: g.ids[w]}}
	held := g.held[w]
	switch r := g.rng.IntN(25); {
	case r == 0:
		ev.Event.Kind = messages.KindCleared
		g.held[w] = nil
	case r < 6 && len(held) > 0:
		p := held[g.rng.IntN(len(held))]
		ev.Event.Kind, ev.Event.Removed = messages.KindRemoved, []messages.ExternalHash{engine(p, w)}
		g.held[w] = slices.DeleteFunc(held, func(q []uint8) bool { return len(q) >= len(p) && slices.Equal(q[:len(p)], p) })
	default:
		var parent []uint8
		if len(held) > 0 && g.rng.IntN(3) > 0 {
			parent = held[g.rng.IntN(len(held))]
			ev.Event.HasParent, ev.Event.ParentHash = true, engine(parent, w)
		}
		ev.Event.Kind = messages.KindStored
		for range 1 + g.rng.IntN(3) {
			parent = append(slices.Clone(parent), uint8(g.rng.IntN(3)))
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: engine(parent, w), TokensHash: local(parent)})
			if !slices.ContainsFunc(g.held[w], func(q []uint8) bool { return slices.Equal(q, parent) }) {
				g.held[w] = append(g.held[w], parent)
			}
		}
	}
	return ev
}

func (g *streams) query() []messages.LocalHash {
	var p []uint8
	var q []messages.LocalHash
	for range 1 + g.rng.IntN(6) {
		p = append(p, uint8(g.rng.IntN(3)))
		q = append(q, local(p))
	}
	return q
}

var allOptions = radix.MatchOptions{Frequencies: true, TreeSizes: true, Tiers: true}

// canonical orders scores deepest first, then by stream.
func canonical(s []radix.Score) []radix.Score {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b radix.Score) int {
		return cmp.Or(cmp.Compare(b.Blocks, a.Blocks), cmp.Compare(a.Key.Worker, b.Key.Worker), cmp.Compare(a.Key.DpRank, b.Key.DpRank))
	})
	return s
}

// checkAnswer: an answer is never silently wrong. Streams of answering,
// complete shards score exactly as in the plain tree; streams of missing
// shards are absent; streams of recovering shards score at most what the
// plain tree says; no stream appears that the plain tree lacks. A complete
// answer also has the plain tree's frequencies.
func checkAnswer(t *testing.T, who string, ans *Answer, plain *radix.Tree, q []messages.LocalHash, shards int) {
	t.Helper()
	var want radix.Overlap
	plain.FindMatches(q, allOptions, &want)
	wantBy := map[messages.WorkerKey]radix.Score{}
	for _, s := range want.Scores {
		wantBy[s.Key] = s
	}
	for _, s := range ans.Scores {
		w, ok := wantBy[s.Key]
		shard := indexer.ShardOf(s.Key.Worker, shards)
		switch {
		case !ok:
			t.Fatalf("%s: phantom score %+v (query %v)", who, s, q)
		case slices.Contains(ans.Missing, shard):
			t.Fatalf("%s: score %+v from missing shard %d", who, s, shard)
		case slices.Contains(ans.Recovering, shard):
			if s.Blocks > w.Blocks {
				t.Fatalf("%s: recovering shard %d scores %+v above the truth %+v", who, shard, s, w)
			}
		case s != w:
			t.Fatalf("%s: score %+v, want %+v", who, s, w)
		}
		delete(wantBy, s.Key)
	}
	for k, w := range wantBy {
		shard := indexer.ShardOf(k.Worker, shards)
		if !slices.Contains(ans.Missing, shard) && !slices.Contains(ans.Recovering, shard) {
			t.Fatalf("%s: stream %v of complete shard %d absent, want %+v", who, k, shard, w)
		}
	}
	if !ans.Partial() && !slices.Equal(ans.Frequencies, want.Frequencies) {
		t.Fatalf("%s: frequencies %v, want %v", who, ans.Frequencies, want.Frequencies)
	}
	if got, exp := canonical(ans.Scores), canonical(want.Scores); !ans.Partial() && !slices.Equal(got, exp) {
		t.Fatalf("%s: scores %v, want %v", who, got, exp)
	}
}
