package routing

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing/predicted"
)

// fakeClock is an injected clock (Config.Now) that only the test moves.
type fakeClock struct{ ns atomic.Int64 }

// fakeEpoch is far from the wall clock, so a wall-clock read shows.
var fakeEpoch = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) Now() time.Time          { return fakeEpoch.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) set(since time.Duration) { c.ns.Store(int64(since)) }

// The route actor reads every time from Config.Now: a prediction made at
// t expires once the injected clock reaches t + TTL and not before, and a
// booking ages out PrefillTTL after its route on that clock, while the
// wall clock moves by milliseconds over the test. A route request's
// deadline is the asker's, on the wall clock: one a minute ahead of the
// wall is answered although the injected clock is decades past it.
func TestActorHonoursInjectedClock(t *testing.T) {
	const ttl = time.Hour
	var clock fakeClock
	cfg := DefaultConfig()
	cfg.PredictedWaitCheck = false // the predicted credit in full: the test is about its lifetime
	cfg.Load.PrefillTTL = ttl
	cfg.Now = clock.Now
	ask, _ := predictingActorWith(t, cfg, predicted.Config{TTL: ttl}, []Candidate{{Key: wk(1, 0)}, {Key: wk(2, 0)}}, nil)
	p := blocks(100, 8)
	wallStart := time.Now()

	r0 := ask(&RouteRequest{Request: Request{ID: "r0", ISL: 16 * len(p), BlockSize: 16}, Hashes: p,
		Deadline: wallStart.Add(time.Minute)}).(*RouteReply)
	if r0.Err != nil {
		t.Fatalf("route with a wall-clock deadline a minute ahead: %v", r0.Err)
	}
	predictedOn := func() (Decision, predicted.Stats) {
		t.Helper()
		rep := ask(&RouteRequest{Request: Request{ISL: 16 * len(p), BlockSize: 16}, Hashes: p, Advisory: true}).(*RouteReply)
		if rep.Err != nil {
			t.Fatal(rep.Err)
		}
		return rep.Decision, ask(&PredictionsRequest{}).(*PredictionsReply).Stats
	}
	booked := func() (requests int) {
		t.Helper()
		for _, r := range ask(&LoadRequest{}).(*LoadReply).Ranks {
			requests += r.PrefillRequests + r.DecodeRequests
		}
		return requests
	}

	clock.set(ttl - time.Nanosecond)
	if d, st := predictedOn(); d.Worker != r0.Decision.Worker || d.OverlapBlocks != uint32(len(p)) || st.Expired != 0 {
		t.Fatalf("1 ns before the TTL on the injected clock: decision on %v with %d blocks (want %v, %d), %d expired",
			d.Worker, d.OverlapBlocks, r0.Decision.Worker, len(p), st.Expired)
	}
	if r := routeHashes(ask, "r1", blocks(900, 8)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if n := booked(); n != 2 {
		t.Fatalf("1 ns before the prefill TTL: %d requests booked, want r0 and r1", n)
	}

	clock.set(ttl)
	if d, st := predictedOn(); d.OverlapBlocks != 0 || st.Expired != uint64(len(p)) {
		t.Fatalf("at the TTL on the injected clock: %d predicted blocks still credited, %d expired (want 0, %d)",
			d.OverlapBlocks, st.Expired, len(p))
	}
	if r := routeHashes(ask, "r2", blocks(1900, 8)); r.Err != nil {
		t.Fatal(r.Err)
	}
	if n := booked(); n != 2 {
		t.Fatalf("at r0's prefill TTL: %d requests booked, want r1 and r2", n)
	}
	if rep := ask(&Bookkeeping{ID: "r0"}).(*BookkeepingReply); !errors.Is(rep.Err, ErrUnknownRequest) {
		t.Fatalf("prefill_done of r0 after its TTL on the injected clock: %v, want ErrUnknownRequest", rep.Err)
	}
	if wall := time.Since(wallStart); wall >= time.Minute {
		t.Fatalf("the test took %v of wall time: the hour it checks would not be the injected clock's alone", wall)
	}
}
