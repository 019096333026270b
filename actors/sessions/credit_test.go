package sessions

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
)

func cands(keys ...messages.WorkerKey) []routing.Candidate {
	c := make([]routing.Candidate, len(keys))
	for i, k := range keys {
		c[i].Key = k
	}
	return c
}

func TestCredit(t *testing.T) {
	x := New(Config{})
	x.Apply(st(1, 0, "s1", noParent, 1, 2, 3, 4), t0)
	x.Apply(st(2, 0, "s1", noParent, 5, 6), t0.Add(time.Second)) // newest holder
	x.Apply(st(3, 0, "other", noParent, 7), t0)
	all := cands(wk(1, 0), wk(2, 0), wk(3, 0))
	for _, tc := range []struct {
		name   string
		id     string
		weight float64
		cands  []routing.Candidate
		want   []Bonus
	}{
		{"toward the newest holder", "s1", 1, all, []Bonus{{wk(2, 0), 2}}},
		{"weight scales, floored", "s1", 1.6, all, []Bonus{{wk(2, 0), 3}}},
		{"below one block: nothing", "s1", 0.4, all, nil},
		{"newest holder not a candidate: the next newest", "s1", 1, cands(wk(1, 0), wk(3, 0)), []Bonus{{wk(1, 0), 4}}},
		{"no holder among the candidates", "s1", 1, cands(wk(3, 0), wk(2, 1)), nil},
		{"unknown session", "s9", 1, all, nil},
		{"zero weight", "s1", 0, all, nil},
		{"negative weight", "s1", -1, all, nil},
		{"NaN weight", "s1", math.NaN(), all, nil},
		{"infinite weight", "s1", math.Inf(1), all, nil},
		{"huge weight saturates", "s1", 1e300, all, []Bonus{{wk(2, 0), math.MaxUint32}}},
	} {
		if got := x.Credit(tc.id, tc.weight, tc.cands, nil); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCombine(t *testing.T) {
	ov := func(kv ...uint32) []routing.Overlap {
		var o []routing.Overlap
		for i := 0; i < len(kv); i += 2 {
			o = append(o, routing.Overlap{Key: wk(uint64(kv[i]), 0), Blocks: kv[i+1]})
		}
		return o
	}
	for _, tc := range []struct {
		name     string
		overlaps []routing.Overlap
		bonus    []Bonus
		limit    uint32
		want     []routing.Overlap
	}{
		{"added to the holder", ov(1, 5, 2, 2), []Bonus{{wk(2, 0), 3}}, 0, ov(1, 5, 2, 5)},
		{"capped at the request's blocks", ov(1, 5, 2, 2), []Bonus{{wk(2, 0), 3}}, 4, ov(1, 5, 2, 4)},
		{"never below the physical overlap", ov(1, 10), []Bonus{{wk(1, 0), 3}}, 8, ov(1, 10)},
		{"a holder without overlap is appended", ov(1, 5), []Bonus{{wk(2, 0), 3}}, 2, ov(1, 5, 2, 2)},
		{"duplicate keys: from the largest", ov(1, 2, 1, 4), []Bonus{{wk(1, 0), 1}}, 0, ov(1, 5, 1, 5)},
		{"saturates", ov(1, math.MaxUint32-1), []Bonus{{wk(1, 0), 5}}, 0, ov(1, math.MaxUint32)},
		{"no bonus: a copy", ov(1, 5), nil, 0, ov(1, 5)},
	} {
		orig := slices.Clone(tc.overlaps)
		got := Combine(tc.overlaps, tc.bonus, tc.limit, nil)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if !slices.Equal(orig, tc.overlaps) {
			t.Errorf("%s: overlaps modified", tc.name)
		}
	}
}

// TestCreditRouting: the credit moves a tie toward the session's worker;
// a much longer physical match elsewhere still wins.
func TestCreditRouting(t *testing.T) {
	x := New(Config{})
	x.Apply(st(2, 0, "s1", noParent, 1, 2, 3, 4), t0) // the previous turn ran on worker 2
	c := cands(wk(1, 0), wk(2, 0), wk(3, 0))
	req := routing.Request{ID: "turn-2", ISL: 64 * 16, BlockSize: 16}
	decide := func(overlaps []routing.Overlap) messages.WorkerKey {
		r, err := routing.New(routing.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		d, err := r.Decide(req, overlaps, c)
		if err != nil {
			t.Fatal(err)
		}
		return d.Worker
	}
	bonus := x.Credit("s1", 1, c, nil)
	limit := uint32((req.ISL + req.BlockSize - 1) / req.BlockSize)

	// Same physical overlap everywhere (a shared system prompt): the
	// session's worker wins.
	tie := []routing.Overlap{{Key: wk(1, 0), Blocks: 8}, {Key: wk(2, 0), Blocks: 8}, {Key: wk(3, 0), Blocks: 8}}
	if w := decide(Combine(tie, bonus, limit, nil)); w != wk(2, 0) {
		t.Errorf("tie: chose %v, want the session's worker", w)
	}
	// Worker 3 matches 20 blocks, worker 2 only 8 (+4 credit): worker 3.
	long := []routing.Overlap{{Key: wk(2, 0), Blocks: 8}, {Key: wk(3, 0), Blocks: 20}}
	if w := decide(Combine(long, bonus, limit, nil)); w != wk(3, 0) {
		t.Errorf("long match elsewhere: chose %v, want worker 3", w)
	}
	// No session: as before.
	if b := x.Credit("nobody", 1, c, nil); len(b) != 0 {
		t.Errorf("credit without a session: %v", b)
	}
}
