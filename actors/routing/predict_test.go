package routing

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/messages"
)

// predictingActor starts a route actor with predictions configured by pc
// over the given candidates.
func predictingActor(t *testing.T, pc predicted.Config, cands []Candidate, eventLess map[messages.WorkerKey]int) (ask func(msg any) any, send func(msg any)) {
	t.Helper()
	return predictingActorWith(t, DefaultConfig(), pc, cands, eventLess)
}

// predictingActorWith is predictingActor with the router configured by cfg.
func predictingActorWith(t *testing.T, cfg Config, pc predicted.Config, cands []Candidate, eventLess map[messages.WorkerKey]int) (ask func(msg any) any, send func(msg any)) {
	t.Helper()
	system := actor.NewActorSystem()
	props, err := PredictingProps(cfg, pc)
	if err != nil {
		t.Fatal(err)
	}
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { system.Root.Stop(pid) })
	system.Root.Send(pid, &SetCandidates{Candidates: cands, EventLess: eventLess})
	ask = func(msg any) any {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, msg, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	return ask, func(msg any) { system.Root.Send(pid, msg) }
}

func blocks(base uint64, n int) []messages.LocalHash {
	out := make([]messages.LocalHash, n)
	for i := range out {
		out[i] = messages.LocalHash(base + uint64(i))
	}
	return out
}

func routeHashes(ask func(any) any, id string, hashes []messages.LocalHash, overlaps ...Overlap) *RouteReply {
	return ask(&RouteRequest{Request: Request{ID: id, ISL: 16 * len(hashes), BlockSize: 16}, Overlaps: overlaps, Hashes: hashes}).(*RouteReply)
}

// Siblings whose events have not arrived (the index reports no overlap
// for any of them) land together with predictions and spread without.
// With the predicted-wait falloff (wait.go) the fourth, three siblings
// already waiting on the first one's prefill and three workers idle, goes
// to an idle worker.
func TestActorSiblingsColocateWithPredictions(t *testing.T) {
	cands := []Candidate{{Key: wk(1, 0)}, {Key: wk(2, 0)}, {Key: wk(3, 0)}, {Key: wk(4, 0)}}
	p := blocks(100, 64)
	wait := DefaultConfig()
	wait.PredictedWaitFalloff = 1
	for _, tc := range []struct {
		name      string
		cfg       Config
		ttl       time.Duration
		workers   int
		predicted string
	}{
		{"on", DefaultConfig(), 0, 1, "[0 64 64 64]"},
		{"on, with the predicted-wait falloff", wait, 0, 2, "[0 64 64 0]"},
		{"off", DefaultConfig(), predicted.Off, 4, "[0 0 0 0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask, _ := predictingActorWith(t, tc.cfg, predicted.Config{TTL: tc.ttl}, cands, nil)
			seen := map[messages.WorkerKey]bool{}
			var predictedBlocks []uint32
			for i := range 4 {
				r := routeHashes(ask, fmt.Sprint("s", i), p)
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				seen[r.Decision.Worker] = true
				predictedBlocks = append(predictedBlocks, r.PredictedBlocks)
			}
			if len(seen) != tc.workers {
				t.Fatalf("4 siblings on %d workers, want %d", len(seen), tc.workers)
			}
			if fmt.Sprint(predictedBlocks) != tc.predicted {
				t.Fatalf("predicted blocks %v, want %s", predictedBlocks, tc.predicted)
			}
		})
	}
}

// A BlockRemoved from the index kills the confirmed prediction it names
// before the TTL: the next sibling scores only the blocks before it.
func TestActorBlockRemovedKillsPrediction(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	ask, send := predictingActor(t, predicted.Config{TTL: time.Hour}, []Candidate{{Key: A}, {Key: B}}, nil)
	p := blocks(1, 8)
	first := routeHashes(ask, "r1", p).Decision.Worker
	ev := messages.RouterEvent{WorkerID: first.Worker, Event: messages.KvCacheEvent{Kind: messages.KindStored}}
	for i, h := range p {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: messages.ExternalHash(900 + i), TokensHash: h})
	}
	removed := messages.RouterEvent{WorkerID: first.Worker, Event: messages.KvCacheEvent{Kind: messages.KindRemoved,
		Removed: []messages.ExternalHash{903}}}
	send(&messages.RouterEventBatch{Events: []messages.RouterEvent{ev, removed}}) // applied before the next route (mailbox order)
	// The index (here: the caller) now reports the 3 blocks the engine
	// still holds; the prediction adds nothing beyond them.
	r := routeHashes(ask, "r2", p, Overlap{Key: first, Blocks: 3})
	if r.Decision.Worker != first || r.Decision.OverlapBlocks != 3 || r.PredictedBlocks != 0 {
		t.Fatalf("after BlockRemoved: %+v predicted %d, want %v with 3 blocks, none predicted", r.Decision.Worker, r.PredictedBlocks, first)
	}
	st := ask(&PredictionsRequest{}).(*PredictionsReply).Stats
	if st.Confirmed != 8 || st.Killed != 1 {
		t.Fatalf("stats %+v, want 8 confirmed, 1 killed", st)
	}
}

// An event-less worker is scored from its own history only, next to a
// worker that publishes events (predictions for it off): B, event-less,
// takes the prompt first (A carries some remote load); the prompt's next
// request stays on B only because B's history holds it — without it A,
// now the less loaded, would win.
func TestActorEventLessWorkerFromOwnHistory(t *testing.T) {
	A, B := wk(1, 0), wk(2, 0)
	cands := []Candidate{{Key: A, Remote: RemoteLoad{Blocks: 10}}, {Key: B}}
	p := blocks(1, 8)
	for _, tc := range []struct {
		name      string
		eventLess map[messages.WorkerKey]int
		second    messages.WorkerKey
	}{{"B event-less", map[messages.WorkerKey]int{B: 16}, B}, {"B publishes events", nil, A}} {
		t.Run(tc.name, func(t *testing.T) {
			ask, _ := predictingActor(t, predicted.Config{TTL: predicted.Off}, cands, tc.eventLess)
			if r := routeHashes(ask, "r1", p); r.Decision.Worker != B {
				t.Fatalf("first: %v, want B", r.Decision.Worker)
			}
			r := routeHashes(ask, "r2", p)
			if r.Decision.Worker != tc.second {
				t.Fatalf("second: %v (predicted %d), want %v", r.Decision.Worker, r.PredictedBlocks, tc.second)
			}
			rep := ask(&PredictionsRequest{}).(*PredictionsReply)
			if tc.eventLess != nil && (r.PredictedBlocks != 8 || len(rep.Blocks) != 1 || rep.Blocks[B] != 8) {
				t.Fatalf("predicted %d, event-less blocks %v, want 8 and B: 8", r.PredictedBlocks, rep.Blocks)
			}
			if tc.eventLess == nil && (r.PredictedBlocks != 0 || rep.Stats.Blocks != 0) {
				t.Fatalf("predictions off, yet %d predicted (%+v)", r.PredictedBlocks, rep.Stats)
			}
		})
	}
}
