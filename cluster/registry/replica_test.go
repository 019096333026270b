//go:build !race

// Several members in one process trip data races inside protoactor-go
// (see cluster/clusterindex/members_test.go), so this builds without -race.

package registry

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// join starts n members on agent, each with its registry replica, in
// parallel, and has them leave in parallel when the test ends:
// protoactor-go's cluster sleeps a second in each start and two in each
// graceful leave, which one after the other would be most of the test.
func join(t *testing.T, agent *test.InMemAgent, n int) []*Replica {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rs, ms, errs := make([]*Replica, n), make([]*member.Member, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
			if rs[i], errs[i] = Start(system, Config{}); errs[i] != nil {
				return
			}
			if ms[i], errs[i] = member.Start(system, member.Config{Name: "registry", Provider: member.ProviderTest,
				TestAgent: agent, GossipInterval: time.Hour}); errs[i] != nil {
				return
			}
			rs[i].Join(ms[i])
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		var left sync.WaitGroup
		for i, r := range rs {
			if r != nil {
				left.Go(func() {
					r.Stop()
					if ms[i] != nil {
						ms[i].Shutdown()
					}
				})
			}
		}
		left.Wait()
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// waitUntil waits until ok holds (eventually.True).
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	eventually.True(t, what, func() (bool, string) { return ok(), "not yet" })
}

// TestReplicas: a registration put on one member is on every member when
// Put returns; a tombstone likewise; a member joining later copies the
// whole registry, tombstones included; every member computes the same
// owner for each stream.
func TestReplicas(t *testing.T) {
	t.Parallel()
	agent := test.NewInMemAgent()
	rs := join(t, agent, 2)
	waitUntil(t, "both members see each other", func() bool { return len(rs[0].Members()) == 2 && len(rs[1].Members()) == 2 })
	a, b := messages.WorkerKey{Worker: 1}, messages.WorkerKey{Worker: 2, DpRank: 1}
	if unacked := rs[0].Put(Entry{Key: a, Worker: Worker{Model: "m", BlockSize: 16, Endpoint: "tcp://e1:1"}},
		Entry{Key: b, Worker: Worker{Model: "m", BlockSize: 16, Endpoint: "tcp://e2:1"}}); len(unacked) > 0 {
		t.Fatalf("unacknowledged by %v", unacked)
	}
	if e, ok := rs[1].Get(b); !ok || e.Worker.Endpoint != "tcp://e2:1" || e.Version.Origin != rs[0].Self() {
		t.Fatalf("member 1 holds %+v, %v", e, ok)
	}
	gone, _ := rs[1].Get(a)
	gone.Deleted = true
	rs[1].Put(gone)
	if _, ok := rs[0].Get(a); ok {
		t.Fatal("the tombstone put on member 1 did not reach member 0")
	}
	late := join(t, agent, 1)[0]
	waitUntil(t, "the late member copies the registry", func() bool {
		live := late.Live()
		return len(live) == 1 && live[0].Key == b && len(late.Members()) == 3
	})
	waitUntil(t, "every member sees three", func() bool { return len(rs[0].Members()) == 3 && len(rs[1].Members()) == 3 })
	for _, r := range append(rs, late) {
		if r.Owner(b) != late.Owner(b) || r.Owner(b) == "" {
			t.Fatalf("owners differ: %q vs %q", r.Owner(b), late.Owner(b))
		}
	}
}

// TestLoadExchange: a member answers Loads with what it serves, pushes
// deltas (negative ones too) to the others as they happen, and applies a
// bookkeeping call another forwards.
func TestLoadExchange(t *testing.T) {
	t.Parallel()
	agent := test.NewInMemAgent()
	rs := join(t, agent, 2)
	waitUntil(t, "both members see each other", func() bool { return len(rs[0].Members()) == 2 && len(rs[1].Members()) == 2 })
	k := messages.WorkerKey{Worker: 3, DpRank: 1}
	rs[1].ServeLoads(func() []RankLoad { return []RankLoad{{Key: k, PrefillTokens: 64, Blocks: 4, Requests: 1}} })
	got, err := rs[0].Loads(rs[1].Self(), time.Second)
	if err != nil || len(got) != 1 || got[0] != (RankLoad{Key: k, PrefillTokens: 64, Blocks: 4, Requests: 1}) {
		t.Fatalf("loads from member 1: %+v, %v", got, err)
	}
	deltas := make(chan RankLoad, 2)
	rs[1].ServeLoadDeltas(func(member string, l RankLoad) {
		if member == rs[0].Self() {
			deltas <- l
		}
	})
	rs[0].PushLoad(RankLoad{Key: k, PrefillTokens: 32, Blocks: 2, Requests: 1})
	rs[0].PushLoad(RankLoad{Key: k, PrefillTokens: -32})
	for _, want := range []RankLoad{{Key: k, PrefillTokens: 32, Blocks: 2, Requests: 1}, {Key: k, PrefillTokens: -32}} {
		select {
		case l := <-deltas:
			if l != want {
				t.Errorf("delta %+v, want %+v", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("delta %+v never arrived", want)
		}
	}
	rs[1].ServeBookkeeping(func(id string, free bool) (bool, error) { return id == "known" && free, nil })
	if found, err := rs[0].Bookkeep(rs[1].Self(), "known", true, time.Second); !found || err != nil {
		t.Errorf("forwarded free of a known request: %v, %v", found, err)
	}
	if found, err := rs[0].Bookkeep(rs[1].Self(), "other", true, time.Second); found || err != nil {
		t.Errorf("forwarded free of an unknown request: %v, %v", found, err)
	}
}
