package requestpath

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// fakeBackend books like the router: Route books on the first worker it
// lists, with the load it was told; it records every call.
type fakeBackend struct {
	mu     sync.Mutex
	answer api.RouteResult
	routed []api.RouteRequest
	calls  []string
	booked map[string]messages.WorkerKey
	fail   error
	// keepsRoom applies a request's RoomRule to the answer as the router
	// does: refused before booking.
	keepsRoom bool
}

func (f *fakeBackend) Route(_ context.Context, req api.RouteRequest) (api.RouteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routed = append(f.routed, req)
	if f.fail != nil {
		return api.RouteResult{}, f.fail
	}
	if rule := req.KeepRoom; f.keepsRoom && rule.Ranks > 0 {
		all, _ := Candidates(f.answer, nil, 0)
		if left := RoomLeft(all, messages.WorkerKey{Worker: f.answer.WorkerID, DpRank: f.answer.DpRank}, rule.AboveBlocks); left < rule.Ranks {
			return api.RouteResult{}, fmt.Errorf("%w: %d left", api.ErrRoomKept, left)
		}
	}
	if f.booked == nil {
		f.booked = map[string]messages.WorkerKey{}
	}
	f.booked[req.RequestID] = messages.WorkerKey{Worker: f.answer.WorkerID, DpRank: f.answer.DpRank}
	res := f.answer
	res.RequestID = req.RequestID
	return res, nil
}

func (f *fakeBackend) call(s string, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	if _, ok := f.booked[id]; !ok {
		return api.Errorf(api.ErrNotFound, "unknown_request", "not routed")
	}
	if strings.HasPrefix(s, "free") {
		delete(f.booked, id)
	}
	return nil
}

func (f *fakeBackend) PrefillDone(_ context.Context, id string) error {
	return f.call("prefill_done "+id, id)
}
func (f *fakeBackend) Free(_ context.Context, id string) error { return f.call("free "+id, id) }
func (f *fakeBackend) Rebook(_ context.Context, model, tenant, id string, to messages.WorkerKey) error {
	if err := f.call(fmt.Sprintf("rebook %s %s/%s → %d", id, model, tenant, to.Worker), id); err != nil {
		return err
	}
	f.mu.Lock()
	f.booked[id] = to
	f.mu.Unlock()
	return nil
}
func (f *fakeBackend) MovePrefill(_ context.Context, model, tenant, id string, to messages.WorkerKey) error {
	return f.call(fmt.Sprintf("move_prefill %s %s/%s → %d", id, model, tenant, to.Worker), id)
}
func (f *fakeBackend) Models(context.Context) []string { return []string{"m"} }

func (f *fakeBackend) Calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "; ")
}

func threeWorkers() api.RouteResult {
	return api.RouteResult{WorkerID: 1, CachedTokens: 16, ServingEndpoint: "h1:1", Scores: []api.RouteScore{
		{WorkerID: 1, Logit: 1, ActiveDecodeBlocks: 10, ServingEndpoint: "h1:1"},
		{WorkerID: 2, Logit: 2, ActiveDecodeBlocks: 5, ServingEndpoint: "h2:1"},
		{WorkerID: 3, Logit: 3},
	}}
}

func TestRouteAndBookkeeping(t *testing.T) {
	ctx := context.Background()
	be := &fakeBackend{answer: threeWorkers()}
	p := New(be, Config{})
	b, err := p.Route(ctx, Request{ID: "r1", Model: "m", Tokens: []uint32{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Candidates) != 2 || b.Candidates[0].Key.Worker != 1 || b.Candidates[1].Key.Worker != 2 || b.CachedTokens != 16 {
		t.Fatalf("candidates %+v", b.Candidates)
	}
	if p.Lookup("r1") != b || p.InFlight() != 1 {
		t.Fatalf("not in flight")
	}
	// The first choice refused the connection; the next best served.
	b.ServedEndpoint(ctx, "h2:1")
	b.FirstByte(ctx)
	b.FirstByte(ctx)
	b.Done(ctx)
	b.Done(ctx)
	if got, want := be.Calls(), "rebook r1 m/default → 2; prefill_done r1; free r1"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
	if p.InFlight() != 0 || p.Lookup("r1") != nil || b.Worker().Worker != 2 {
		t.Errorf("after done: %d in flight, booked on %+v", p.InFlight(), b.Worker())
	}
	m := p.Metrics()
	for _, c := range []struct {
		metric, a, b string
		want         int64
	}{
		{"decisions", OutcomeRouted, "", 1},
		{"skipped_workers", SkipNoServingEndpoint, "", 1},
		{"bookkeeping", "rebook", ResultOK, 1},
		{"bookkeeping", "free", ResultIgnored, 1},
	} {
		if got := m.Count(c.metric, c.a, c.b); got != c.want {
			t.Errorf("%s{%s,%s} = %d, want %d", c.metric, c.a, c.b, got, c.want)
		}
	}
	var sb strings.Builder
	if err := p.WriteMetrics(&sb); err != nil || !strings.Contains(sb.String(), `kvrouter_request_path_bookkeeping_total{front="",action="rebook",result="ok"} 1`) ||
		!strings.Contains(sb.String(), `kvrouter_request_path_in_flight{front=""} 0`) {
		t.Errorf("metrics text (%v):\n%s", err, sb.String())
	}
}

// Every refusal after the router booked frees the booking at once.
func TestRefusalsFreeTheBooking(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		answer  api.RouteResult
		cfg     Config
		req     Request
		want    error
		outcome string
	}{
		"no serving endpoint": {api.RouteResult{WorkerID: 3, Scores: []api.RouteScore{{WorkerID: 3}}}, Config{},
			Request{ID: "x", Model: "m", Tokens: []uint32{1}}, ErrNoEndpoint, OutcomeNoEndpoint},
		"subset excludes all": {threeWorkers(), Config{}, Request{ID: "x", Model: "m", Tokens: []uint32{1}, Subset: []string{"h9:1"}},
			ErrNoEndpoint, OutcomeNoEndpoint},
		"every worker over the threshold": {threeWorkers(), Config{ShedAboveBlocks: 4},
			Request{ID: "x", Model: "m", Tokens: []uint32{1}}, ErrOverloaded, OutcomeShed},
	} {
		be := &fakeBackend{answer: c.answer}
		p := New(be, c.cfg)
		if _, err := p.Route(ctx, c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", name, err, c.want)
		}
		if be.Calls() != "free x" || p.InFlight() != 0 || p.Metrics().Count("decisions", c.outcome, "") != 1 {
			t.Errorf("%s: calls %q, %d in flight", name, be.Calls(), p.InFlight())
		}
	}
	// Under the threshold on one worker: routed.
	p := New(&fakeBackend{answer: threeWorkers()}, Config{ShedAboveBlocks: 5})
	if b, err := p.Route(ctx, Request{ID: "y", Model: "m", Tokens: []uint32{1}}); err != nil {
		t.Errorf("one worker has room: %v", err)
	} else {
		b.Done(ctx)
	}
	// The router's own refusal books nothing.
	be := &fakeBackend{fail: api.Errorf(api.ErrNotFound, "unknown_namespace", "no such model")}
	p = New(be, Config{})
	if _, err := p.Route(ctx, Request{ID: "z", Model: "q", Tokens: []uint32{1}}); !errors.Is(err, api.ErrNotFound) || be.Calls() != "" {
		t.Errorf("router refusal: %v, calls %q", err, be.Calls())
	}
}

// A request without token ids routes by load, its load estimated from
// placeholder ids, and the reason is counted.
func TestRouteWithoutTokens(t *testing.T) {
	be := &fakeBackend{answer: threeWorkers()}
	p := New(be, Config{})
	b, err := p.Route(context.Background(), Request{ID: "c", Model: "m", NoTokensReason: "no_token_ids", EstimatedTokens: 40,
		SessionID: "s", CacheSalt: "salt"})
	if err != nil {
		t.Fatal(err)
	}
	b.Done(context.Background())
	req := be.routed[0]
	if len(req.TokenIDs) != 40 || req.TokenIDs[0] != placeholder || req.CacheSalt != "" || req.SessionID != "" || req.TenantID != api.DefaultTenant {
		t.Errorf("routed %+v", req)
	}
	if p.Metrics().Count("routed_by_load", "no_token_ids", "") != 1 {
		t.Errorf("reason not counted")
	}
}

// The in-flight table is bounded: past MaxInFlight requests are shed
// without asking the router.
func TestInFlightIsBounded(t *testing.T) {
	ctx := context.Background()
	be := &fakeBackend{answer: threeWorkers()}
	p := New(be, Config{MaxInFlight: 1})
	b, err := p.Route(ctx, Request{ID: "a", Model: "m", Tokens: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Route(ctx, Request{ID: "b", Model: "m", Tokens: []uint32{1}}); !errors.Is(err, ErrOverloaded) || len(be.routed) != 1 {
		t.Errorf("second in flight: %v (%d routed)", err, len(be.routed))
	}
	b.Done(ctx)
	if b2, err := p.Route(ctx, Request{ID: "b", Model: "m", Tokens: []uint32{1}}); err != nil {
		t.Errorf("after done: %v", err)
	} else {
		b2.Done(ctx)
	}
}

// While the gate the path shares with the process's other front ends is
// full, a request is shed (ErrOverloaded, outcome over_capacity) without
// reaching the router; once a route call leaves, it is routed, and the
// gate holds the route call only, not the booking after it.
func TestAdmissionSheds(t *testing.T) {
	ctx := context.Background()
	be := &fakeBackend{answer: threeWorkers()}
	gate := admission.New(1, nil)
	p := New(be, Config{Admission: gate})
	if !gate.Enter() { // another front end's route call holds the only place
		t.Fatal("an empty gate refused")
	}
	if _, err := p.Route(ctx, Request{ID: "r1", Model: "m", Tokens: []uint32{1}}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("with the gate full: %v, want ErrOverloaded", err)
	}
	if n := len(be.routed); n != 0 || p.Metrics().Count("decisions", OutcomeOverCapacity, "") != 1 {
		t.Fatalf("a shed request reached the router (%d calls) or was not counted", n)
	}
	gate.Leave()
	b, err := p.Route(ctx, Request{ID: "r1", Model: "m", Tokens: []uint32{1}})
	if err != nil {
		t.Fatal(err)
	}
	if gate.InFlight() != 0 || p.InFlight() != 1 {
		t.Errorf("after the route: gate %d in flight (want 0), bookings %d (want 1)", gate.InFlight(), p.InFlight())
	}
	b.Done(ctx)
}
