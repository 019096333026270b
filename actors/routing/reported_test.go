package routing

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// scored decides a 64-token request (block size 16) with scores.
func scored(t *testing.T, r *Router, cs []Candidate, overlaps ...Overlap) Decision {
	t.Helper()
	d, err := r.Decide(Request{ID: "q", ISL: 64, BlockSize: 16, WithScores: true}, overlaps, cs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestOutsideTrafficRoutesAway(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	r := newRouter(t, DefaultConfig())
	cs := cands(A, B)
	// Nothing booked; A's engine runs 6 requests of 8 blocks each that
	// never passed this router, B's is idle.
	cs[0].Reported = Reported{Seq: 1, Running: 6, KVBlocks: 48, HasKVBlocks: true}
	cs[1].Reported = Reported{Seq: 1}
	r.Observe(cs)
	d := scored(t, r, cs, Overlap{Key: A, Blocks: 1})
	if d.Worker != B {
		t.Fatalf("chose %v; A carries 6 outside requests", d.Worker)
	}
	if s := d.Scores[0]; s.OutsideRequests != 6 || s.OutsideBlocks != 48 || s.Requests != 6 || s.DecodeBlocks != 48 {
		t.Fatalf("A's score %+v", s)
	}
	// Without the report, A's cached block wins.
	plain := cands(A, B)
	r.Observe(plain)
	if d := scored(t, r, plain, Overlap{Key: A, Blocks: 1}); d.Worker != A {
		t.Fatalf("without signals chose %v", d.Worker)
	}
}

// The cost is the reported load plus what was booked after the scrape:
// the outside load is measured once per scrape, against the booked load
// of that moment.
func TestOutsideLoadIsMeasuredOncePerScrape(t *testing.T) {
	A := wk(1, 0)
	r := newRouter(t, DefaultConfig())
	for i := range 2 {
		loadOn(t, r, fmt.Sprint("mine", i), A, 0, 4)
	}
	// The scrape sees this router's 2 requests and 3 others.
	cs := cands(A)
	cs[0].Reported = Reported{Seq: 7, Running: 5, KVBlocks: 20, HasKVBlocks: true}
	r.Observe(cs)
	if s := scored(t, r, cs).Scores[0]; s.OutsideRequests != 3 || s.OutsideBlocks != 12 || s.Requests != 5 || s.DecodeBlocks != 20 {
		t.Fatalf("after the scrape %+v", s)
	}
	// Two more routed before the next scrape: booked grows, the outside
	// load stays, even when the same scrape is passed in again.
	loadOn(t, r, "later0", A, 0, 4)
	loadOn(t, r, "later1", A, 0, 4)
	r.Observe(cs)
	if s := scored(t, r, cs).Scores[0]; s.OutsideRequests != 3 || s.Requests != 7 || s.DecodeBlocks != 28 {
		t.Fatalf("booked after the scrape %+v", s)
	}
	// The next scrape sees all 4 of ours and the 3 others finished: only
	// the booked load is left.
	cs[0].Reported = Reported{Seq: 8, Running: 4, KVBlocks: 16, HasKVBlocks: true}
	r.Observe(cs)
	if s := scored(t, r, cs).Scores[0]; s.OutsideRequests != 0 || s.OutsideBlocks != 0 || s.Requests != 4 {
		t.Fatalf("outside traffic gone %+v", s)
	}
	// An engine reporting less than booked (requests not arrived yet, or
	// finished and not freed): the booked load is the floor.
	cs[0].Reported = Reported{Seq: 9, Running: 1, KVBlocks: 2, HasKVBlocks: true}
	r.Observe(cs)
	if s := scored(t, r, cs).Scores[0]; s.Requests != 4 || s.DecodeBlocks != 16 {
		t.Fatalf("under-reporting engine %+v", s)
	}
}

func TestOutsideLoadEstimates(t *testing.T) {
	booked := RemoteLoad{Requests: 2, Blocks: 10}
	for _, c := range []struct {
		rep  Reported
		want RemoteLoad
	}{
		// waiting requests need what a running one holds: 12 + 3×12/4 − 10
		{Reported{Waiting: 3, Running: 4, KVBlocks: 12, HasKVBlocks: true}, RemoteLoad{Requests: 5, Blocks: 11}},
		// no KV figure: the booked blocks per booked request
		{Reported{Waiting: 1, Running: 3}, RemoteLoad{Requests: 2, Blocks: 10}},
		{Reported{Running: 1}, RemoteLoad{}},
	} {
		if got := outsideLoad(c.rep, booked); got != c.want {
			t.Errorf("%+v against %+v: %+v, want %+v", c.rep, booked, got, c.want)
		}
	}
}

func TestSaturatedChosenOnlyWhenAllAre(t *testing.T) {
	A, B, C := wk(1, 0), wk(2, 0), wk(3, 0)
	for _, temp := range []float64{0, 0.5} {
		cfg := DefaultConfig()
		cfg.Temperature = temp
		r := newRouter(t, cfg)
		cs := cands(A, B, C)
		cs[0].Reported = Reported{Seq: 1, Saturated: true} // caches the whole prompt
		cs[2].Reported = Reported{Seq: 1, Saturated: true}
		r.Observe(cs)
		for i := range 200 {
			d, err := r.Decide(Request{ID: fmt.Sprint(i), ISL: 64, BlockSize: 16}, []Overlap{{Key: A, Blocks: 4}}, cs)
			if err != nil {
				t.Fatal(err)
			}
			if d.Worker != B || d.Saturated || d.SaturatedCandidates != 2 {
				t.Fatalf("temperature %v: %+v", temp, d)
			}
		}
		// Every candidate saturated: the cost decides as without signals,
		// and the decision says so.
		cs[1].Reported = Reported{Seq: 1, Saturated: true}
		r.Observe(cs)
		d := scored(t, r, cs, Overlap{Key: A, Blocks: 4})
		if temp == 0 && d.Worker != A {
			t.Fatalf("all saturated: chose %v, want the cheapest A", d.Worker)
		}
		if !d.Saturated || d.SaturatedCandidates != 3 {
			t.Fatalf("all saturated: %+v", d)
		}
	}
}

// A request for an adapter lands on the worker running it, then on one
// with room for it, never on a full one while another has room.
func TestLoraAffinity(t *testing.T) {
	A, B, C := wk(1, 0), wk(2, 0), wk(3, 0)
	r := newRouter(t, DefaultConfig())
	cs := cands(A, B, C)
	cs[0].Reported = Reported{Seq: 1, Lora: LoraSlots{Known: true, Running: []string{"sql"}, Max: 2}}
	cs[1].Reported = Reported{Seq: 1, Lora: LoraSlots{Known: true, Running: []string{"chat"}, Max: 2}}
	cs[2].Reported = Reported{Seq: 1, Lora: LoraSlots{Known: true, Running: []string{"math"}, Waiting: []string{"code"}, Max: 2}}
	r.Observe(cs)
	route := func(lora string, overlaps ...Overlap) messages.WorkerKey {
		t.Helper()
		d, err := r.Decide(Request{ID: lora, ISL: 64, BlockSize: 16, Lora: lora}, overlaps, cs)
		if err != nil {
			t.Fatal(err)
		}
		return d.Worker
	}
	// C holds the whole prompt, B part of it: the adapter decides first.
	if got := route("sql", Overlap{Key: C, Blocks: 4}, Overlap{Key: B, Blocks: 2}); got != A {
		t.Errorf("sql: chose %v, want A, which runs it", got)
	}
	// Nobody runs "new": A and B have a free slot, C's two are taken.
	if got := route("new", Overlap{Key: C, Blocks: 4}, Overlap{Key: B, Blocks: 2}); got != B {
		t.Errorf("new: chose %v, want B (room, and the better cache of the two with room)", got)
	}
	// With A's and B's single slots taken, "code", already waiting on
	// the full C, goes there: it loads with the next free slot.
	cs[0].Reported.Lora.Max, cs[1].Reported.Lora.Max = 1, 1
	if got := route("code", Overlap{Key: A, Blocks: 4}); got != C {
		t.Errorf("code: chose %v, want C, where it waits", got)
	}
	cs[0].Reported.Lora.Max, cs[1].Reported.Lora.Max = 2, 2
	// No adapter: the cost alone.
	if got := route("", Overlap{Key: C, Blocks: 4}); got != C {
		t.Errorf("no adapter: chose %v, want C", got)
	}
	// Every one full: the cost decides.
	for i := range cs {
		cs[i].Reported.Lora.Max = 1
	}
	if got := route("new", Overlap{Key: C, Blocks: 4}); got != C {
		t.Errorf("all full: chose %v, want the cheapest C", got)
	}
}
