package disagg

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

func key(w int) messages.WorkerKey { return messages.WorkerKey{Worker: messages.WorkerID(w)} }

func TestDecide(t *testing.T) {
	req := Request{ISL: 4096, BlockSize: 16}
	cold := []Prefill{{Key: key(10)}, {Key: key(11)}}
	cases := []struct {
		name     string
		cfg      Config
		req      Request
		dec      Decode
		prefills []Prefill
		split    bool
		reason   string
		prefill  messages.WorkerKey
	}{
		{"a warm decode worker gets no remote prefill", DefaultConfig(), req, Decode{Key: key(1), CachedTokens: 3900}, cold, false, api.DisaggWarmDecode, messages.WorkerKey{}},
		{"exactly the fraction is warm", Config{MaxDecodeHit: 0.5, MinUncachedTokens: 1}, req, Decode{CachedTokens: 2048}, cold, false, api.DisaggWarmDecode, messages.WorkerKey{}},
		{"a long cold prompt is split", DefaultConfig(), req, Decode{Key: key(1)}, cold, true, api.DisaggUncached, key(10)},
		{"a short uncached part stays local", DefaultConfig(), Request{ISL: 300, BlockSize: 16}, Decode{}, cold, false, api.DisaggShortUncached, messages.WorkerKey{}},
		{"the uncached part counts, not the prompt", Config{MaxDecodeHit: 1, MinUncachedTokens: 512}, req, Decode{CachedTokens: 3700}, cold, false, api.DisaggShortUncached, messages.WorkerKey{}},
		{"exactly the threshold splits", Config{MaxDecodeHit: 1, MinUncachedTokens: 512}, req, Decode{CachedTokens: 4096 - 512}, cold, true, api.DisaggUncached, key(10)},
		{"an empty prompt stays local", DefaultConfig(), Request{BlockSize: 16}, Decode{}, cold, false, api.DisaggShortUncached, messages.WorkerKey{}},
		{"always splits a warm one", Config{Mode: ModeAlways, MaxDecodeHit: 0.8}, req, Decode{CachedTokens: 4096}, cold, true, api.DisaggAlways, key(10)},
		{"never splits a cold one", Config{Mode: ModeNever, MaxDecodeHit: 0.8}, req, Decode{}, cold, false, api.DisaggNever, messages.WorkerKey{}},
		{"no prefill pool", DefaultConfig(), req, Decode{}, nil, false, api.DisaggNoPrefillPool, messages.WorkerKey{}},
		{"always without a pool", Config{Mode: ModeAlways, MaxDecodeHit: 1}, req, Decode{}, nil, false, api.DisaggNoPrefillPool, messages.WorkerKey{}},
		{"the prefill leg goes where its prefix is cached", DefaultConfig(), req, Decode{},
			[]Prefill{{Key: key(10)}, {Key: key(11), OverlapBlocks: 200}, {Key: key(12), OverlapBlocks: 100}}, true, api.DisaggUncached, key(11)},
		{"a queue outweighs a small cache", DefaultConfig(), req, Decode{},
			[]Prefill{{Key: key(10), QueuedTokens: 100}, {Key: key(11), OverlapBlocks: 4, QueuedTokens: 8000}}, true, api.DisaggUncached, key(10)},
		{"a cached prefix beats a shorter queue", DefaultConfig(), req, Decode{},
			[]Prefill{{Key: key(10), QueuedTokens: 100}, {Key: key(11), OverlapBlocks: 200, QueuedTokens: 2000}}, true, api.DisaggUncached, key(11)},
		{"a saturated prefill worker only when all are", DefaultConfig(), req, Decode{},
			[]Prefill{{Key: key(10), OverlapBlocks: 256, Saturated: true}, {Key: key(11), QueuedTokens: 50000}}, true, api.DisaggUncached, key(11)},
		{"ties go to the lower tie hash", DefaultConfig(), req, Decode{},
			[]Prefill{{Key: key(10), Tie: 9}, {Key: key(11), Tie: 3}, {Key: key(12), Tie: 5}}, true, api.DisaggUncached, key(11)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Decide(c.cfg, c.req, c.dec, c.prefills)
			if o.Split != c.split || o.Reason != c.reason || o.Detail == "" {
				t.Fatalf("outcome %+v, want split %v reason %s", o, c.split, c.reason)
			}
			if !c.split {
				if o != (Outcome{Reason: o.Reason, Detail: o.Detail}) {
					t.Fatalf("unsplit outcome names a prefill leg: %+v", o)
				}
				return
			}
			if o.Prefill != c.prefill {
				t.Fatalf("prefill %v, want %v", o.Prefill, c.prefill)
			}
			if want := min(int64(o.OverlapBlocks)*c.req.BlockSize, c.req.ISL); o.CachedTokens != want || o.PrefillTokens != c.req.ISL-want {
				t.Fatalf("cached %d prefill %d for overlap %d", o.CachedTokens, o.PrefillTokens, o.OverlapBlocks)
			}
		})
	}
}

// The alternate is the runner-up of the same order, on another worker
// than the chosen one: never the chosen leg, and none in a pool of one
// worker (whatever its ranks).
func TestDecideAlternate(t *testing.T) {
	req := Request{ISL: 4096, BlockSize: 16}
	rank := func(w, r int) messages.WorkerKey {
		return messages.WorkerKey{Worker: messages.WorkerID(w), DpRank: messages.DpRank(r)}
	}
	cases := []struct {
		name      string
		prefills  []Prefill
		prefill   messages.WorkerKey
		alternate messages.WorkerKey
		has       bool
		cached    int64
	}{
		{"the runner-up by work", []Prefill{{Key: key(10), QueuedTokens: 500}, {Key: key(11), OverlapBlocks: 200}, {Key: key(12), QueuedTokens: 100}},
			key(11), key(12), true, 0},
		{"its own overlap and cached tokens", []Prefill{{Key: key(10), OverlapBlocks: 100}, {Key: key(11), OverlapBlocks: 200}},
			key(11), key(10), true, 1600},
		{"a saturated runner-up only when all are", []Prefill{{Key: key(10)}, {Key: key(11), Saturated: true}, {Key: key(12), QueuedTokens: 9000}},
			key(10), key(12), true, 0},
		{"another rank of the chosen worker is not an alternate", []Prefill{{Key: rank(10, 0)}, {Key: rank(10, 1)}, {Key: key(11), QueuedTokens: 9000}},
			rank(10, 0), key(11), true, 0},
		{"one worker has no alternate", []Prefill{{Key: rank(10, 0)}, {Key: rank(10, 1)}}, rank(10, 0), messages.WorkerKey{}, false, 0},
		{"one prefill worker has no alternate", []Prefill{{Key: key(10)}}, key(10), messages.WorkerKey{}, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Decide(DefaultConfig(), req, Decode{}, c.prefills)
			if !o.Split || o.Prefill != c.prefill || o.HasAlternate != c.has || o.Alternate.Key != c.alternate || o.Alternate.CachedTokens != c.cached {
				t.Fatalf("outcome %+v, want prefill %v alternate %v (%v, cached %d)", o, c.prefill, c.alternate, c.has, c.cached)
			}
			if o.HasAlternate && o.Alternate.Key.Worker == o.Prefill.Worker {
				t.Fatalf("the alternate %v is on the chosen worker %v", o.Alternate.Key, o.Prefill)
			}
		})
	}
	if o := Decide(DefaultConfig(), req, Decode{CachedTokens: 4000}, []Prefill{{Key: key(10)}, {Key: key(11)}}); o.Split || o.HasAlternate {
		t.Fatalf("an unsplit outcome names an alternate: %+v", o)
	}
}

// The choice does not depend on the order of the prefill candidates.
func TestDecidePermutation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	req := Request{ISL: 8192, BlockSize: 16}
	for range 200 {
		ps := make([]Prefill, 6)
		for i := range ps {
			ps[i] = Prefill{Key: key(i), OverlapBlocks: uint32(rng.IntN(3)) * 64, QueuedTokens: int64(rng.IntN(3)) * 1024,
				Tie: uint64(rng.IntN(2)), Saturated: rng.IntN(8) == 0}
		}
		want := Decide(DefaultConfig(), req, Decode{}, ps)
		for range 5 {
			rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			if got := Decide(DefaultConfig(), req, Decode{}, ps); got != want {
				t.Fatalf("order changed the outcome: %+v vs %+v", got, want)
			}
		}
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{
		{Mode: 7, MaxDecodeHit: 0.5},
		{MaxDecodeHit: 0},
		{MaxDecodeHit: 1.5},
		{MaxDecodeHit: 0.5, MinUncachedTokens: -1},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
	}
	for _, m := range []Mode{ModeAuto, ModeAlways, ModeNever} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("sometimes"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ParseMode(sometimes): %v", err)
	}
}
