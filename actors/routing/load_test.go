package routing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

func TestLoadLifecycle(t *testing.T) {
	A := wk(1, 0)
	l := NewLoad(LoadConfig{})
	steps := []struct {
		name string
		op   func() error
		want RankLoad
	}{
		{"route r1", func() error { return l.Add("r1", A, 100, 8, t0) }, RankLoad{A, 100, 8, 1, 0}},
		{"route r2", func() error { return l.Add("r2", A, 30, 4, t0) }, RankLoad{A, 130, 12, 2, 0}},
		{"prefill_done r1", func() error { return l.PrefillDone("r1", t0) }, RankLoad{A, 30, 12, 1, 1}},
		{"prefill_done r1 again (no-op)", func() error { return l.PrefillDone("r1", t0) }, RankLoad{A, 30, 12, 1, 1}},
		{"free r2 (in prefill)", func() error { return l.Free("r2") }, RankLoad{A, 0, 8, 0, 1}},
		{"free r1 (in decode)", func() error { return l.Free("r1") }, RankLoad{Key: A}},
	}
	for _, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := l.Of(A); got != s.want {
			t.Fatalf("%s: load %+v, want %+v", s.name, got, s.want)
		}
	}
	if l.Len() != 0 || len(l.AppendRanks(nil)) != 0 {
		t.Errorf("not empty: %d requests, %d ranks", l.Len(), len(l.AppendRanks(nil)))
	}
	if err := l.Free("r1"); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("double free: %v", err)
	}
	if err := l.PrefillDone("r1", t0); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("prefill_done after free: %v", err)
	}
	want := LoadStats{Added: 2, PrefillDone: 1, RepeatPrefill: 1, Freed: 2, Unknown: 2}
	if st := l.Stats(); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	// A freed id can be used again.
	if err := l.Add("r1", A, 1, 1, t0); err != nil {
		t.Errorf("re-add after free: %v", err)
	}
}

// Move takes a request's load off its rank onto another, in either phase;
// the old rank is idle again, the new one carries it until Free.
func TestLoadMove(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	l := NewLoad(LoadConfig{})
	if err := l.Add("r1", A, 100, 8, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Move("r1", B); err != nil {
		t.Fatal(err)
	}
	if a, b := l.Of(A), l.Of(B); a != (RankLoad{Key: A}) || b != (RankLoad{B, 100, 8, 1, 0}) {
		t.Fatalf("after move in prefill: A %+v, B %+v", a, b)
	}
	if err := l.PrefillDone("r1", t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Move("r1", A); err != nil {
		t.Fatal(err)
	}
	if a, b := l.Of(A), l.Of(B); a != (RankLoad{A, 0, 8, 0, 1}) || b != (RankLoad{Key: B}) {
		t.Fatalf("after move in decode: A %+v, B %+v", a, b)
	}
	if err := l.Move("r1", A); err != nil || l.Stats().Moved != 2 {
		t.Fatalf("move to its own rank: %v, stats %+v", err, l.Stats())
	}
	if err := l.Free("r1"); err != nil || l.Of(A) != (RankLoad{Key: A}) {
		t.Fatalf("free after move: %v, A %+v", err, l.Of(A))
	}
	if err := l.Move("r1", B); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("move of a freed request: %v", err)
	}
}

func TestLoadIDs(t *testing.T) {
	l := NewLoad(LoadConfig{})
	A := wk(1, 0)
	if err := l.Add("x", A, 1, 1, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Add("x", wk(2, 0), 5, 5, t0); !errors.Is(err, ErrDuplicateRequest) {
		t.Errorf("duplicate: %v", err)
	}
	if got := l.Of(wk(2, 0)); got != (RankLoad{Key: wk(2, 0)}) {
		t.Errorf("duplicate changed load: %+v", got)
	}
	if err := l.Add("", A, 1, 1, t0); !errors.Is(err, ErrInvalidRequestID) {
		t.Errorf("empty id: %v", err)
	}
	if err := l.Add(strings.Repeat("i", DefaultMaxIDLen+1), A, 1, 1, t0); !errors.Is(err, ErrInvalidRequestID) {
		t.Errorf("long id: %v", err)
	}
	if err := l.Add(strings.Repeat("i", DefaultMaxIDLen), A, 1, 1, t0); err != nil {
		t.Errorf("id of MaxIDLen: %v", err)
	}
	if err := l.Add("neg", A, -1, 1, t0); !errors.Is(err, ErrInvalidLoad) {
		t.Errorf("negative load: %v", err)
	}
	if st := l.Stats(); st.Duplicate != 1 || st.InvalidID != 2 || st.Added != 2 {
		t.Errorf("stats %+v", st)
	}
	if key, inPrefill, ok := l.Phase("x"); !ok || !inPrefill || key != A {
		t.Errorf("Phase(x) = %v %v %v", key, inPrefill, ok)
	}
	if _, _, ok := l.Phase("nope"); ok {
		t.Error("Phase of unknown id")
	}
}

func TestLoadTTL(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	l := NewLoad(LoadConfig{PrefillTTL: 10 * time.Second, DecodeTTL: 20 * time.Second})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Add("p", A, 10, 1, t0))                    // prefill deadline t0+10s
	must(l.Add("d", A, 20, 2, t0.Add(time.Second)))   // done at +5s → deadline +25s
	must(l.Add("q", B, 30, 3, t0.Add(2*time.Second))) // prefill deadline +12s
	must(l.PrefillDone("d", t0.Add(5*time.Second)))

	if n := l.Expire(t0.Add(10*time.Second - 1)); n != 0 {
		t.Fatalf("expired %d before the TTL", n)
	}
	if n := l.Expire(t0.Add(10 * time.Second)); n != 1 {
		t.Fatalf("at +10s expired %d, want 1 (p)", n)
	}
	if got := l.Of(A); got != (RankLoad{A, 0, 2, 0, 1}) {
		t.Errorf("A after p expired: %+v", got)
	}
	// A clock step back is ignored (the clock stays at +10s).
	if n := l.Expire(t0); n != 0 {
		t.Errorf("step back expired %d", n)
	}
	if n := l.Expire(t0.Add(24 * time.Second)); n != 1 {
		t.Fatalf("at +24s expired %d, want 1 (q)", n)
	}
	if n := l.Expire(t0.Add(25 * time.Second)); n != 1 {
		t.Fatalf("at +25s expired %d, want 1 (d)", n)
	}
	if l.Len() != 0 || len(l.AppendRanks(nil)) != 0 {
		t.Errorf("left %d requests, %d ranks", l.Len(), len(l.AppendRanks(nil)))
	}
	if st := l.Stats(); st.ExpiredPrefill != 2 || st.ExpiredDecode != 1 {
		t.Errorf("stats %+v", st)
	}
	if err := l.Free("d"); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("free after expiry: %v", err)
	}

	// Negative TTLs never expire.
	l = NewLoad(LoadConfig{PrefillTTL: -1, DecodeTTL: -1})
	must(l.Add("a", A, 1, 1, t0))
	must(l.Add("b", A, 1, 1, t0))
	must(l.PrefillDone("b", t0))
	if n := l.Expire(t0.Add(100 * 365 * 24 * time.Hour)); n != 0 {
		t.Errorf("negative TTL expired %d", n)
	}
}

func TestLoadBounds(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	t.Run("evict oldest", func(t *testing.T) {
		l := NewLoad(LoadConfig{MaxRequests: 3})
		for i, k := range []messages.WorkerKey{A, B, B} {
			if err := l.Add(fmt.Sprint(i), k, 10, 1, t0); err != nil {
				t.Fatal(err)
			}
		}
		// The oldest (0, on A) goes, even though 1 moved on to decode.
		if err := l.PrefillDone("1", t0); err != nil {
			t.Fatal(err)
		}
		if err := l.Add("3", B, 10, 1, t0); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := l.Phase("0"); ok || l.Len() != 3 {
			t.Errorf("0 still tracked, len %d", l.Len())
		}
		if got := l.Of(A); got != (RankLoad{Key: A}) {
			t.Errorf("A load after eviction: %+v", got)
		}
		if got := l.Of(B); got != (RankLoad{B, 20, 3, 2, 1}) {
			t.Errorf("B load: %+v", got)
		}
		if st := l.Stats(); st.Evicted != 1 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("refuse", func(t *testing.T) {
		l := NewLoad(LoadConfig{MaxRequests: 2, RefuseWhenFull: true})
		_ = l.Add("a", A, 1, 1, t0)
		_ = l.Add("b", A, 1, 1, t0)
		if err := l.Add("c", A, 1, 1, t0); !errors.Is(err, ErrFull) {
			t.Errorf("third add: %v", err)
		}
		if st := l.Stats(); st.Refused != 1 || l.Len() != 2 {
			t.Errorf("stats %+v len %d", st, l.Len())
		}
	})
	t.Run("expire before evict", func(t *testing.T) {
		l := NewLoad(LoadConfig{MaxRequests: 2, PrefillTTL: time.Second})
		_ = l.Add("a", A, 1, 1, t0)
		_ = l.Add("b", A, 1, 1, t0)
		if err := l.Add("c", A, 1, 1, t0.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Evicted != 0 || st.ExpiredPrefill != 2 || l.Len() != 1 {
			t.Errorf("stats %+v len %d", st, l.Len())
		}
	})
}

func TestLoadDropWorker(t *testing.T) {
	l := NewLoad(LoadConfig{})
	_ = l.Add("a", wk(1, 0), 1, 1, t0)
	_ = l.Add("b", wk(1, 1), 1, 1, t0)
	_ = l.Add("c", wk(2, 0), 1, 1, t0)
	_ = l.PrefillDone("b", t0)
	if n := l.DropWorker(1); n != 2 {
		t.Errorf("dropped %d, want 2", n)
	}
	if l.Len() != 1 || len(l.AppendRanks(nil)) != 1 || l.Stats().Dropped != 2 {
		t.Errorf("len %d ranks %v stats %+v", l.Len(), l.AppendRanks(nil), l.Stats())
	}
}

// TestLoadModel drives Load with random operations and checks every rank's
// sums, the tracked set and the expiry against a naive model.
func TestLoadModel(t *testing.T) {
	type req struct {
		key             messages.WorkerKey
		prefill, blocks int64
		decode          bool
		deadline        time.Time
		seq             int
	}
	const (
		pTTL = 30 * time.Second
		dTTL = 90 * time.Second
		max  = 40
	)
	rng := rand.New(rand.NewPCG(21, 22))
	var total LoadStats
	defer func() {
		// The random walk must reach every path it is meant to check.
		if total.ExpiredPrefill == 0 || total.ExpiredDecode == 0 || total.Evicted == 0 ||
			total.Duplicate == 0 || total.RepeatPrefill == 0 || total.Unknown == 0 ||
			total.PrefillDone == 0 || total.Freed == 0 || total.Moved == 0 {
			t.Errorf("paths not exercised: %+v", total)
		}
		t.Logf("totals: %+v", total)
	}()
	for run := range 20 {
		l := NewLoad(LoadConfig{PrefillTTL: pTTL, DecodeTTL: dTTL, MaxRequests: max})
		model := map[string]*req{}
		now := t0
		seq := 0
		defer func() {
			st := l.Stats()
			total.ExpiredPrefill += st.ExpiredPrefill
			total.ExpiredDecode += st.ExpiredDecode
			total.Evicted += st.Evicted
			total.Duplicate += st.Duplicate
			total.RepeatPrefill += st.RepeatPrefill
			total.Unknown += st.Unknown
			total.Added += st.Added
			total.PrefillDone += st.PrefillDone
			total.Freed += st.Freed
			total.Moved += st.Moved
		}()
		expire := func() {
			for id, r := range model {
				if !now.Before(r.deadline) {
					delete(model, id)
				}
			}
		}
		for step := range 3000 {
			now = now.Add(time.Duration(rng.IntN(500)) * time.Millisecond)
			id := fmt.Sprint("r", rng.IntN(120))
			switch op := rng.IntN(10); {
			case op < 4:
				key := wk(uint64(rng.IntN(4)), uint32(rng.IntN(2)))
				p, b := int64(rng.IntN(500)), int64(rng.IntN(40))
				err := l.Add(id, key, p, b, now)
				expire() // Add expires due requests first
				if _, dup := model[id]; dup {
					if !errors.Is(err, ErrDuplicateRequest) {
						t.Fatalf("run %d step %d: duplicate add: %v", run, step, err)
					}
				} else if err != nil {
					t.Fatalf("run %d step %d: add: %v", run, step, err)
				}
				if err == nil {
					if len(model) >= max {
						oldest := ""
						for oid, r := range model {
							if oldest == "" || r.seq < model[oldest].seq {
								oldest = oid
							}
						}
						delete(model, oldest)
					}
					seq++
					model[id] = &req{key: key, prefill: p, blocks: b, deadline: now.Add(pTTL), seq: seq}
				}
			case op < 6:
				err := l.PrefillDone(id, now)
				if r, ok := model[id]; ok {
					if err != nil {
						t.Fatalf("prefill_done: %v", err)
					}
					if !r.decode {
						r.decode, r.deadline = true, now.Add(dTTL)
					}
				} else if !errors.Is(err, ErrUnknownRequest) {
					t.Fatalf("prefill_done of unknown: %v", err)
				}
			case op < 8:
				err := l.Free(id)
				if _, ok := model[id]; ok {
					if err != nil {
						t.Fatalf("free: %v", err)
					}
					delete(model, id)
				} else if !errors.Is(err, ErrUnknownRequest) {
					t.Fatalf("free of unknown: %v", err)
				}
			case op < 9:
				key := wk(uint64(rng.IntN(4)), uint32(rng.IntN(2)))
				err := l.Move(id, key)
				if r, ok := model[id]; ok {
					if err != nil {
						t.Fatalf("move: %v", err)
					}
					r.key = key
				} else if !errors.Is(err, ErrUnknownRequest) {
					t.Fatalf("move of unknown: %v", err)
				}
			default:
				l.Expire(now)
				expire()
			}
			// Compare.
			want := map[messages.WorkerKey]RankLoad{}
			for _, r := range model {
				rl := want[r.key]
				rl.Key = r.key
				rl.Blocks += r.blocks
				if r.decode {
					rl.DecodeRequests++
				} else {
					rl.PrefillTokens += r.prefill
					rl.PrefillRequests++
				}
				want[r.key] = rl
			}
			if l.Len() != len(model) {
				t.Fatalf("run %d step %d: len %d, model %d", run, step, l.Len(), len(model))
			}
			got := l.AppendRanks(nil)
			if len(got) != len(want) {
				t.Fatalf("run %d step %d: %d ranks, model %d", run, step, len(got), len(want))
			}
			for _, g := range got {
				if g != want[g.Key] {
					t.Fatalf("run %d step %d: rank %+v, model %+v", run, step, g, want[g.Key])
				}
			}
		}
	}
}
