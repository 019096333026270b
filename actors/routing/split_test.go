package routing

import (
	"errors"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A disaggregated fleet: decode workers D1, D2, a both-role worker B3,
// prefill workers P10, P11.
var (
	d1, d2, b3, p10, p11 = wk(1, 0), wk(2, 0), wk(3, 0), wk(10, 0), wk(11, 0)
	fleet                = []Candidate{{Key: d1, Role: api.RoleDecode}, {Key: d2, Role: api.RoleDecode}, {Key: b3, Role: api.RoleBoth},
		{Key: p10, Role: api.RolePrefill}, {Key: p11, Role: api.RolePrefill}}
)

func splitRouter(t *testing.T) (*Router, []Candidate, []Candidate) {
	t.Helper()
	r, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	dec, pre := Pools(fleet, nil, nil)
	return r, dec, pre
}

func TestRouteSplit(t *testing.T) {
	now := time.Unix(1000, 0)
	const bs = 16
	req := func(id string, isl int) Request { return Request{ID: id, ISL: isl, BlockSize: bs} }
	t.Run("a warm decode worker gets no remote prefill", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		d, o, err := r.RouteSplit(req("warm", 4096), []Overlap{{Key: d2, Blocks: 250}, {Key: p10, Blocks: 256}}, dec, pre, now)
		if err != nil || o.Split || o.Reason != api.DisaggWarmDecode || d.Worker != d2 {
			t.Fatalf("decision %v, outcome %+v, %v: want d2, warm_decode", d.Worker, o, err)
		}
		if l := r.Load().Of(d2); l.PrefillTokens != 4096-250*bs || l.Blocks != 256 {
			t.Errorf("local prefill: decode worker booked %+v", l)
		}
		if n := r.PrefillLoad().Len(); n != 0 {
			t.Errorf("%d prefill legs booked for an unsplit request", n)
		}
	})
	t.Run("a long cold prompt is split, the prefill leg where its prefix is cached", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		d, o, err := r.RouteSplit(req("cold", 8192), []Overlap{{Key: p11, Blocks: 100}}, dec, pre, now)
		if err != nil || !o.Split || o.Reason != api.DisaggUncached || o.Prefill != p11 || o.OverlapBlocks != 100 {
			t.Fatalf("outcome %+v, %v: want split onto p11", o, err)
		}
		if d.Worker == p10 || d.Worker == p11 || d.PrefillTokens != 0 {
			t.Fatalf("decode leg %v with %d prefill tokens", d.Worker, d.PrefillTokens)
		}
		if l := r.Load().Of(d.Worker); l.PrefillTokens != 0 || l.Blocks != 512 {
			t.Errorf("decode leg booked %+v, want its 512 blocks and no prefill", l)
		}
		if l := r.PrefillLoad().Of(p11); l.PrefillTokens != 8192-1600 || l.PrefillRequests != 1 {
			t.Errorf("prefill leg booked %+v", l)
		}
	})
	t.Run("queued prefill moves the next leg", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		_, first, _ := r.RouteSplit(req("a", 8192), nil, dec, pre, now)
		_, second, err := r.RouteSplit(req("b", 8192), nil, dec, pre, now)
		if err != nil || !first.Split || second.Prefill == first.Prefill {
			t.Fatalf("both cold prefill legs on %v (%v): the first one's queue should move the second", first.Prefill, err)
		}
	})
	t.Run("prefill workers are never the decode leg", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		for i := range 20 {
			d, _, err := r.RouteSplit(req(string(rune('a'+i)), 64), []Overlap{{Key: p10, Blocks: 4}, {Key: p11, Blocks: 4}}, dec, pre, now)
			if err != nil || d.Worker == p10 || d.Worker == p11 {
				t.Fatalf("request %d: decode leg %v (%v)", i, d.Worker, err)
			}
		}
	})
	t.Run("bookings return to zero on prefill_done and free", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		d, o, err := r.RouteSplit(req("x", 8192), nil, dec, pre, now)
		if err != nil || !o.Split {
			t.Fatal(o, err)
		}
		if err := r.Load().PrefillDone("x", now); err != nil {
			t.Fatal(err)
		}
		if rel := r.FreePrefill("x"); rel.Key != o.Prefill || rel.PrefillTokens != 8192 {
			t.Errorf("prefill_done released %+v of the prefill leg", rel)
		}
		if l := r.PrefillLoad().Of(o.Prefill); l != (RankLoad{Key: o.Prefill}) {
			t.Errorf("prefill worker after prefill_done: %+v", l)
		}
		if err := r.Load().Free("x"); err != nil {
			t.Fatal(err)
		}
		if rel := r.FreePrefill("x"); rel != (RankLoad{}) {
			t.Errorf("a second release: %+v", rel)
		}
		if l := r.held(d.Worker); l != (RankLoad{Key: d.Worker}) || r.Load().Len()+r.PrefillLoad().Len() != 0 {
			t.Errorf("decode worker after free: %+v", l)
		}
	})
	t.Run("free alone returns both legs", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		d, o, _ := r.RouteSplit(req("y", 8192), nil, dec, pre, now)
		_ = r.Load().Free("y")
		r.FreePrefill("y")
		if r.held(d.Worker) != (RankLoad{Key: d.Worker}) || r.held(o.Prefill) != (RankLoad{Key: o.Prefill}) {
			t.Errorf("after free: decode %+v prefill %+v", r.held(d.Worker), r.held(o.Prefill))
		}
	})
	t.Run("an id is refused while its prefill leg lives", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		if _, _, err := r.RouteSplit(req("z", 8192), nil, dec, pre, now); err != nil {
			t.Fatal(err)
		}
		_ = r.Load().Free("z") // only the decode leg
		if _, _, err := r.RouteSplit(req("z", 8192), nil, dec, pre, now); !errors.Is(err, ErrDuplicateRequest) {
			t.Errorf("reused id with a live prefill leg: %v", err)
		}
	})
	t.Run("a prefill leg never confirmed expires", func(t *testing.T) {
		r, dec, pre := splitRouter(t)
		_, o, _ := r.RouteSplit(req("e", 8192), nil, dec, pre, now)
		r.RouteSplit(req("f", 16), nil, dec, pre, now.Add(r.Config().Load.PrefillTTL+time.Second))
		if l := r.PrefillLoad().Of(o.Prefill); l.PrefillRequests != 0 {
			t.Errorf("prefill leg after its TTL: %+v", l)
		}
	})
}

// The same decisions as Route when the decode pool is every candidate and
// nothing splits (disaggregation off).
func TestRouteSplitNeverIsRoute(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Disagg = disagg.Config{Mode: disagg.ModeNever, MaxDecodeHit: 1}
	a, _ := New(cfg)
	b, _ := New(cfg)
	cands := []Candidate{{Key: d1}, {Key: d2}, {Key: b3}}
	now := time.Unix(0, 0)
	for i := range 50 {
		q := Request{ID: string(rune('A' + i)), ISL: 100 + 37*i, BlockSize: 16}
		ov := []Overlap{{Key: cands[i%3].Key, Blocks: uint32(i % 5)}}
		want, err1 := a.Route(q, ov, cands, now)
		got, o, err2 := b.RouteSplit(q, ov, cands, nil, now)
		if err1 != nil || err2 != nil || got.Worker != want.Worker || got.PrefillTokens != want.PrefillTokens || o.Split {
			t.Fatalf("request %d: %v/%v vs %v/%v, %+v", i, got.Worker, err2, want.Worker, err1, o)
		}
	}
}

func TestNewRejectsBadDisagg(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Disagg = disagg.Config{MaxDecodeHit: 2}
	if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("max decode hit 2: %v", err)
	}
}

// Through the route actor: a namespace without roles answers without
// disaggregation; with roles the reply carries the outcome, bookkeeping
// releases the prefill leg, and neither a selection nor a reservation
// lands on a prefill worker.
func TestActorSplit(t *testing.T) {
	system, pid := spawnRouteActor(t)
	ask := func(msg any) any {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, msg, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	route := func(id string, advisory bool) *RouteReply {
		t.Helper()
		return ask(&RouteRequest{Request: Request{ID: id, ISL: 8192, BlockSize: 16}, Advisory: advisory,
			Overlaps: []Overlap{{Key: p10, Blocks: 512}}}).(*RouteReply)
	}
	system.Root.Send(pid, &SetCandidates{Candidates: []Candidate{{Key: d1}, {Key: d2, Role: api.RoleBoth}}})
	if r := route("plain", false); r.Err != nil || r.Disagg != nil {
		t.Fatalf("no roles: %+v", r)
	}
	ask(&Bookkeeping{ID: "plain", Free: true})
	system.Root.Send(pid, &SetCandidates{Candidates: fleet})
	r := route("split", false)
	if r.Err != nil || r.Disagg == nil || !r.Disagg.Split || r.Disagg.Prefill != p10 {
		t.Fatalf("roles: %+v (%+v)", r, r.Disagg)
	}
	if rel := ask(&Bookkeeping{ID: "split"}).(*BookkeepingReply); rel.Err != nil || rel.ReleasedPrefill.Key != p10 || rel.ReleasedPrefill.PrefillTokens != 0 {
		// p10 held the whole prompt: nothing to prefill, nothing released
		t.Errorf("prefill_done: %+v", rel)
	}
	if rel := ask(&Bookkeeping{ID: "split", Free: true}).(*BookkeepingReply); rel.Err != nil || rel.Released.Blocks != 512 || rel.ReleasedPrefill != (RankLoad{}) {
		t.Errorf("free: %+v", rel)
	}
	for _, l := range ask(&LoadRequest{Candidates: true}).(*LoadReply).Ranks {
		if l != (RankLoad{Key: l.Key}) {
			t.Errorf("after prefill_done and free: %+v", l)
		}
	}
	if s := route("select", true); s.Err != nil || s.Disagg != nil || s.Decision.Worker == p10 || s.Decision.Worker == p11 {
		t.Errorf("selection: %v %+v (%v)", s.Decision.Worker, s.Disagg, s.Err)
	}
	if res := ask(&Reserve{ID: "pinned", Explicit: &Booking{Key: p10, Blocks: 1}}).(*ReserveReply); !errors.Is(res.Err, ErrNotCandidate) {
		t.Errorf("reserve on a prefill worker: %v", res.Err)
	}
}
