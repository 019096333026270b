package routing

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/reply"
)

// spawnRouteActor starts a route actor with the default configuration,
// stopped at cleanup.
func spawnRouteActor(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	system := actor.NewActorSystem()
	props, err := Props(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { system.Root.Stop(pid) })
	return system, pid
}

// asker asks the route actor pid and returns its answer (the test fails
// on no answer within a second).
func asker(t *testing.T, system *actor.ActorSystem, pid *actor.PID) func(msg any) any {
	return func(msg any) any {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, msg, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// The route actor scores with the remote load a RemoteUpdate sets, until
// the next SetCandidates replaces the list; bookkeeping replies say what
// load they released; LoadRequest reports what it booked itself.
func TestActorRemoteUpdate(t *testing.T) {
	system, pid := spawnRouteActor(t)
	A, B := wk(1, 0), wk(2, 0)
	ask := asker(t, system, pid)
	route := func(id string) *RouteReply {
		t.Helper()
		return ask(&RouteRequest{Request: Request{ID: id, ISL: 64, BlockSize: 16}, Overlaps: []Overlap{{Key: A, Blocks: 2}}}).(*RouteReply)
	}
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}, {Key: B}}})
	system.Root.Send(pid, &RemoteUpdate{Key: A, Load: RemoteLoad{Blocks: 40}})
	if d := route("r1").Decision; d.Worker != B {
		t.Errorf("A carries 40 remote blocks: routed to %v, want B", d.Worker)
	}
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}, {Key: B}}}) // the next snapshot: A idle again
	if d := route("r2").Decision; d.Worker != A {
		t.Errorf("after SetCandidates: routed to %v, want A (its overlap)", d.Worker)
	}
	// Bookkeeping says what it released: prefill_done the prefill tokens
	// (64, nothing cached on B; the request stays), free the blocks and
	// the request (now in decode; the prefill is gone).
	if r := ask(&Bookkeeping{ID: "r1"}).(*BookkeepingReply); r.Err != nil || r.Released != (RankLoad{Key: B, PrefillTokens: 64}) {
		t.Errorf("prefill_done released %+v (%v)", r.Released, r.Err)
	}
	if r := ask(&Bookkeeping{ID: "r1", Free: true}).(*BookkeepingReply); r.Err != nil || r.Released != (RankLoad{Key: B, Blocks: 4, DecodeRequests: 1}) {
		t.Errorf("free released %+v (%v)", r.Released, r.Err)
	}
	if r := ask(&Bookkeeping{ID: "r1", Free: true}).(*BookkeepingReply); r.Err == nil || r.Released != (RankLoad{}) {
		t.Errorf("second free released %+v (%v)", r.Released, r.Err)
	}
	ask(&RouteRequest{Request: Request{ID: "r3", ISL: 64, BlockSize: 16}}) // B again: two ranks booked
	got := ask(&LoadRequest{}).(*LoadReply).Ranks
	if len(got) != 2 {
		t.Fatalf("booked ranks %+v, want A and B", got)
	}
	for _, r := range got {
		if r.Blocks != 4 {
			t.Errorf("rank %v booked %d blocks, want 4 (one 64-token request)", r.Key, r.Blocks)
		}
	}
}

// A request carrying a reply channel is answered into it, not to a
// future: a route and its free, as the service sends them.
func TestActorAnswersIntoReplyChannel(t *testing.T) {
	system, pid := spawnRouteActor(t)
	A := wk(1, 0)
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}}})
	rr := &RouteRequest{Request: Request{ID: "r1", ISL: 64, BlockSize: 16}, Reply: reply.Make[*RouteReply](1)}
	system.Root.Send(pid, rr)
	got, err := rr.Reply.Wait(time.Second)
	if err != nil || got.Err != nil || got.Decision.Worker != A {
		t.Fatalf("route answered %+v, %v; want A", got, err)
	}
	bk := &Bookkeeping{ID: "r1", Free: true, Reply: reply.Make[*BookkeepingReply](1)}
	system.Root.Send(pid, bk)
	if r, err := bk.Reply.Wait(time.Second); err != nil || r.Err != nil || r.Released != (RankLoad{Key: A, PrefillTokens: 64, Blocks: 4, PrefillRequests: 1}) {
		t.Errorf("free answered %+v, %v", r, err)
	}
}

// A request taken past its deadline is answered ErrExpired and counted,
// neither scored nor booked; one without a deadline, or before it, is
// routed as ever. The deadlines are fixed instants, not the clock's.
func TestActorShedsExpiredRequests(t *testing.T) {
	system, pid := spawnRouteActor(t)
	A := wk(1, 0)
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}}})
	route := func(id string, deadline time.Time) *RouteReply {
		t.Helper()
		rr := &RouteRequest{Request: Request{ID: id, ISL: 64, BlockSize: 16}, Deadline: deadline, Reply: reply.Make[*RouteReply](1)}
		system.Root.Send(pid, rr)
		got, err := rr.Reply.Wait(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	before := expiry.Counts()[expiry.Route].N
	for _, id := range []string{"late1", "late2", "late3"} {
		if r := route(id, time.Unix(1, 0)); !errors.Is(r.Err, expiry.ErrExpired) || r.Decision.Worker != (wk(0, 0)) {
			t.Errorf("%s, long past its deadline: %+v, want ErrExpired and no decision", id, r)
		}
	}
	if n := expiry.Counts()[expiry.Route].N - before; n != 3 {
		t.Errorf("expired counted %d times, want 3", n)
	}
	ranks := func() []RankLoad {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, &LoadRequest{}, time.Minute).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*LoadReply).Ranks
	}
	if got := ranks(); len(got) != 0 {
		t.Errorf("expired requests booked load: %+v", got)
	}
	if r := route("late1", time.Time{}); r.Err != nil || r.Decision.Worker != A {
		t.Errorf("no deadline (an expired request's id, never booked): %+v", r)
	}
	if r := route("due", time.Now().Add(time.Hour)); r.Err != nil || r.Decision.Worker != A {
		t.Errorf("an hour before its deadline: %+v", r)
	}
	if got := ranks(); len(got) != 1 || got[0].Blocks != 8 {
		t.Errorf("booked %+v, want the two routed requests' 8 blocks on A", got)
	}
}
