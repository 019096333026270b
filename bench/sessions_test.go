package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// sessWorkload is a generated multi-turn chat workload: every conversation
// starts with a shared system prompt, and turn k's prompt is turn k−1's
// prompt, its answer and a new user message. Turns of different
// conversations interleave (each round, every conversation sends its next
// turn, in a shuffled order).
type sessWorkload struct {
	conversations, turns int
	workers, capacity    int // simulated engines and their LRU cache, in blocks
	inFlight             int // a request is freed after this many later routes
	seed                 uint64
}

const sessBlock = 16

// sessTurn is one request of the workload.
type sessTurn struct {
	conv   int
	prompt []uint32 // what /route sees
	answer []uint32 // what the engine generates and caches after the prompt
}

// rounds returns the workload's requests, round by round.
func (w sessWorkload) rounds() [][]sessTurn {
	rng := rand.New(rand.NewPCG(w.seed, 1))
	next := uint32(1)
	text := func(lo, hi int) []uint32 {
		out := make([]uint32, lo+rng.IntN(hi-lo+1))
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
	system := text(64, 64)
	history := make([][]uint32, w.conversations)
	for c := range history {
		history[c] = system
	}
	var out [][]sessTurn
	for range w.turns {
		var round []sessTurn
		for _, c := range rng.Perm(w.conversations) {
			p := append(append([]uint32(nil), history[c]...), text(32, 160)...)
			a := text(64, 256)
			round = append(round, sessTurn{conv: c, prompt: p, answer: a})
			history[c] = append(append([]uint32(nil), p...), a...)
		}
		out = append(out, round)
	}
	return out
}

// sessResult is one run's figures.
type sessResult struct {
	requests, credited       int
	inputTokens, cachedToken int
	perWorkerReqs            []float64
	perWorkerPrefill         []float64 // uncached prompt tokens
}

// sessRun serves the workload through an in-process service over simulated
// engines; with sessions the route requests carry the conversation's
// session id (the engines report it either way, as they would).
func sessRun(t *testing.T, w sessWorkload, rounds [][]sessTurn, credit float64, withSessions bool) sessResult {
	t.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: sessBlock, Timeout: 5 * time.Second, SessionCredit: credit})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx := context.Background()
	engines := make([]*simengine.Engine, w.workers)
	for i := range engines {
		e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: sessBlock, CapacityBlocks: w.capacity})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		engines[i] = e
		if err := svc.Register(ctx, api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: e.Endpoint(),
			ReplayEndpoint: e.ReplayEndpoint(), ModelName: "m", BlockSize: sessBlock}); err != nil {
			t.Fatal(err)
		}
	}
	res := sessResult{perWorkerReqs: make([]float64, w.workers), perWorkerPrefill: make([]float64, w.workers)}
	var booked []string
	for _, round := range rounds {
		for _, tr := range round {
			sessSettle(t, svc, engines) // every earlier request's events are applied: deterministic figures
			id := fmt.Sprintf("r%d", res.requests)
			sess := fmt.Sprintf("conv-%d", tr.conv)
			req := api.RouteRequest{TokenIDs: tr.prompt, ModelName: "m", RequestID: id}
			if withSessions {
				req.SessionID = sess
			}
			d, err := svc.Route(ctx, req)
			if err != nil {
				t.Fatalf("route %s: %v", id, err)
			}
			if d.SessionCreditBlocks > 0 {
				res.credited++
			}
			wi := int(d.WorkerID) - 1
			served := append(append([]uint32(nil), tr.prompt...), tr.answer...)
			hit, err := engines[wi].ServeRequest(simengine.Request{Tokens: served, SessionID: sess})
			if err != nil {
				t.Fatal(err)
			}
			cached := min(hit*sessBlock, len(tr.prompt))
			res.requests++
			res.inputTokens += len(tr.prompt)
			res.cachedToken += cached
			res.perWorkerReqs[wi]++
			res.perWorkerPrefill[wi] += float64(len(tr.prompt) - cached)
			booked = append(booked, id)
			if len(booked) > w.inFlight {
				if err := svc.Free(ctx, booked[0]); err != nil {
					t.Fatal(err)
				}
				booked = booked[1:]
			}
		}
	}
	return res
}

// sessSettle waits until every engine's published batches are applied, in
// the index and in the session index: the listeners have delivered them,
// then one more /workers (its index stats pass through the index front
// after them) and a session read (queued behind what the front forwarded).
func sessSettle(t *testing.T, svc *service.Service, engines []*simengine.Engine) {
	t.Helper()
	tries := 0
	eventually.True(t, "engines settled", func() (bool, string) {
		if tries%5 == 0 { // a heartbeat now and then: a stream nothing was heard from yet, a lost tail
			for _, e := range engines {
				_ = e.Publish()
			}
		}
		tries++
		ws, err := svc.Workers(context.Background())
		ok := err == nil && len(ws) == len(engines)
		for i := 0; ok && i < len(ws); i++ {
			r := ws[i].Ranks[0]
			ok = r.State == api.StateExact && r.LastSeq != nil && *r.LastSeq+1 == engines[i].Stats().NextSeq
		}
		return ok, fmt.Sprintf("%+v %v", ws, err)
	})
	if _, err := svc.Workers(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, _ = svc.Session(context.Background(), api.SessionRequest{ID: "barrier"}) // unknown: 404
}

// cov is the coefficient of variation (population σ / mean).
func cov(v []float64) float64 {
	var sum, sq float64
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		sq += (x - mean) * (x - mean)
	}
	if mean == 0 {
		return 0
	}
	return math.Sqrt(sq/float64(len(v))) / mean
}

// TestSessionRoutingFigures runs a generated multi-turn chat workload
// through the in-process service twice — /route without session ids (plain
// overlap routing) and with them (session credit 1, and 0.5) — over
// simulated engines with finite LRU caches, and logs each run's hit rate
// (cached prompt tokens / prompt tokens, as the engines counted them) and
// load spread (coefficient of variation over workers of requests and of
// uncached prompt tokens); "credited" counts the requests whose chosen
// worker's overlap included session credit. The quick default takes
// seconds; the full run (about 15 s on 2 cores):
//
//	KVROUTER_SESSIONS=1 go test ./bench/ -run TestSessionRoutingFigures -v -timeout 15m
func TestSessionRoutingFigures(t *testing.T) {
	w := sessWorkload{conversations: 24, turns: 4, workers: 4, capacity: 256, inFlight: 8, seed: 7}
	if os.Getenv("KVROUTER_SESSIONS") != "" {
		w = sessWorkload{conversations: 256, turns: 8, workers: 8, capacity: 4096, inFlight: 32, seed: 7}
	}
	rounds := w.rounds()
	var out strings.Builder
	fmt.Fprintf(&out, "machine: %d CPUs, %s %s/%s\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&out, "%d conversations × %d turns, %d workers × %d blocks of %d tokens, %d requests in flight\n",
		w.conversations, w.turns, w.workers, w.capacity, sessBlock, w.inFlight)
	fmt.Fprintf(&out, "%-22s %8s %8s %8s %8s %9s\n", "routing", "requests", "hit", "reqCoV", "prefCoV", "credited")
	for _, run := range []struct {
		name         string
		credit       float64
		withSessions bool
	}{
		{"overlap (no session)", 0, false},
		{"session credit 0.5", 0.5, true},
		{"session credit 1", 1, true},
	} {
		r := sessRun(t, w, rounds, run.credit, run.withSessions)
		if r.requests != w.conversations*w.turns || r.inputTokens == 0 {
			t.Fatalf("%s: %d requests, %d input tokens", run.name, r.requests, r.inputTokens)
		}
		if run.withSessions != (r.credited > 0) {
			t.Errorf("%s: %d requests credited", run.name, r.credited)
		}
		fmt.Fprintf(&out, "%-22s %8d %7.1f%% %8.3f %8.3f %9d\n", run.name, r.requests,
			100*float64(r.cachedToken)/float64(r.inputTokens), cov(r.perWorkerReqs), cov(r.perWorkerPrefill), r.credited)
	}
	t.Logf("session-aware routing vs plain overlap routing\n%s", out.String())
}
