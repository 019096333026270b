package routing

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Pending keeps named selections for a booking: latest wins, a peek does
// not consume, entries expire at the TTL and the oldest go first when
// full; a replaced id's old slot neither expires nor evicts the new one.
func TestPending(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	p := NewPending(time.Minute, 2)
	p.Remember("s1", Booking{Key: A, PrefillTokens: 10, Blocks: 2}, t0)
	p.Remember("s1", Booking{Key: B, PrefillTokens: 5, Blocks: 1}, t0.Add(30*time.Second)) // latest wins
	if b, err := p.Peek("s1", t0.Add(70*time.Second)); err != nil || b.Key != B {
		t.Fatalf("peek after the first entry's TTL: %+v %v (the replacement lives on)", b, err)
	}
	if b, err := p.Peek("s1", t0.Add(70*time.Second)); err != nil || b.Key != B {
		t.Fatalf("second peek: %+v %v (peek does not consume)", b, err)
	}
	p.Forget("s1", true)
	if _, err := p.Peek("s1", t0); !errors.Is(err, ErrNoPending) {
		t.Errorf("after forget: %v", err)
	}
	for i := range 3 { // max 2: s-0 evicted
		p.Remember(fmt.Sprint("s-", i), Booking{Key: A}, t0.Add(time.Duration(i)*time.Second))
	}
	if _, err := p.Peek("s-0", t0.Add(3*time.Second)); !errors.Is(err, ErrNoPending) {
		t.Errorf("oldest not evicted: %v", err)
	}
	if p.Len() != 2 {
		t.Errorf("%d entries, want 2", p.Len())
	}
	if _, err := p.Peek("s-2", t0.Add(62*time.Second)); !errors.Is(err, ErrNoPending) {
		t.Errorf("past its TTL: %v", err)
	}
	p.Remember("s-3", Booking{Key: A}, t0.Add(200*time.Second)) // drops both expired entries
	want := PendingStats{Remembered: 6, Taken: 1, Missed: 3, Expired: 2, Evicted: 1}
	if st := p.Stats(); st != want || p.Len() != 1 {
		t.Errorf("stats %+v (%d entries), want %+v", st, p.Len(), want)
	}
	for i := range 1000 { // replacing one id forever keeps memory bounded
		p.Remember("same", Booking{Key: A}, t0.Add(200*time.Second+time.Duration(i)))
	}
	if len(p.order) > 4 {
		t.Errorf("order holds %d slots for 2 entries", len(p.order))
	}
}

// The route actor books what an advisory selection chose when the same id
// is reserved, once; an explicit booking needs a candidate rank and
// supersedes the pending selection.
func TestActorReserve(t *testing.T) {
	system, pid := spawnRouteActor(t)
	A, B := wk(1, 0), wk(2, 0)
	ask := asker(t, system, pid)
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: A}, {Key: B}}})
	sel := ask(&RouteRequest{Request: Request{ID: "s1", ISL: 64, BlockSize: 16}, Overlaps: []Overlap{{Key: B, Blocks: 3}}, Advisory: true}).(*RouteReply)
	if sel.Err != nil || sel.Decision.Worker != B {
		t.Fatalf("advisory: %+v", sel)
	}
	if l := ask(&LoadRequest{}).(*LoadReply); len(l.Ranks) != 0 {
		t.Fatalf("an advisory selection booked %+v", l.Ranks)
	}
	r := ask(&Reserve{ID: "s1"}).(*ReserveReply)
	if want := (Booking{Key: B, PrefillTokens: 16, Blocks: 4}); r.Err != nil || r.Booking != want {
		t.Fatalf("reserve: %+v, want %+v", r, want)
	}
	if r := ask(&Reserve{ID: "s1"}).(*ReserveReply); !errors.Is(r.Err, ErrNoPending) {
		t.Errorf("second replay: %v", r.Err)
	}
	if r := ask(&Reserve{ID: "s1", Explicit: &Booking{Key: A}}).(*ReserveReply); !errors.Is(r.Err, ErrDuplicateRequest) {
		t.Errorf("explicit booking of a booked id: %v", r.Err)
	}
	if r := ask(&Reserve{ID: "s2", Explicit: &Booking{Key: wk(9, 0), Blocks: 1}}).(*ReserveReply); !errors.Is(r.Err, ErrNotCandidate) {
		t.Errorf("explicit booking on a non-candidate: %v", r.Err)
	}
	ask(&RouteRequest{Request: Request{ID: "s3", ISL: 64, BlockSize: 16}, Advisory: true})
	if r := ask(&Reserve{ID: "s3", Explicit: &Booking{Key: A, PrefillTokens: 7, Blocks: 1}}).(*ReserveReply); r.Err != nil {
		t.Fatalf("explicit: %v", r.Err)
	}
	if l := ask(&LoadRequest{Candidates: true}).(*LoadReply); len(l.Ranks) != 2 || l.Ranks[0] != (RankLoad{A, 7, 1, 1, 0}) || l.Ranks[1] != (RankLoad{B, 16, 4, 1, 0}) {
		t.Errorf("loads %+v", l.Ranks)
	}
	ask(&Bookkeeping{ID: "s3", Free: true})
	if r := ask(&Reserve{ID: "s3"}).(*ReserveReply); !errors.Is(r.Err, ErrNoPending) {
		t.Errorf("the explicit booking left the pending selection: %v", r.Err)
	}
}
