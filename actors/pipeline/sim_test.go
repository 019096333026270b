package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/publisher"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/kvrouter/kvrouter/messages/routerevent"
	"github.com/zeebo/xxh3"
)

// simWorker is one simulated engine and the prompts that drive it.
type simWorker struct {
	eng    *simengine.Engine
	drv    *simengine.RandomDriver
	stream messages.StreamID
	cfg    listener.Config
}

func newSimWorker(t *testing.T, id int, enc simengine.Encoding, replay bool, opts simengine.Options) *simWorker {
	t.Helper()
	if opts.Endpoint == "" {
		opts.Endpoint = "tcp://127.0.0.1:0"
	}
	if replay {
		opts.ReplayEndpoint = "tcp://127.0.0.1:0"
	}
	opts.Encoding, opts.BlockSize = enc, 4
	if opts.CapacityBlocks == 0 {
		opts.CapacityBlocks = 48 // small: prompts evict each other
	}
	eng, err := simengine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	drv, err := simengine.NewRandomDriver(simengine.RandomConfig{Seed: uint64(id), BlockSize: 4,
		Prefixes: 4, MaxPrefixBlocks: 12, MaxSuffixTokens: 12, Sessions: true})
	if err != nil {
		t.Fatal(err)
	}
	stream := messages.StreamID{Worker: messages.WorkerID(id)}
	return &simWorker{eng: eng, drv: drv, stream: stream, cfg: listener.Config{
		Stream: stream, Engine: enc.Engine(), Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(),
		// Every simulated engine with a replay endpoint answers: a timeout is
		// only ever a slow machine, which must not degrade an exact stream.
		BlockSize: 4, Silence: -1, ReplayTimeout: 30 * time.Second,
	}}
}

// serve sends n prompts through the engine.
func (w *simWorker) serve(t *testing.T, n int) {
	t.Helper()
	for range n {
		p, err := w.drv.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.eng.ServeRequest(simengine.Request{Tokens: p.Tokens, SessionID: p.SessionID}); err != nil {
			t.Fatal(err)
		}
	}
}

// truth is the engine's cache: its engine hashes, sorted.
func (w *simWorker) truth() []messages.ExternalHash {
	return w.eng.Contents().Held()
}

// quiesce publishes a heartbeat on every engine (so a trailing loss shows
// as a gap) and waits until every listener has delivered up to the engine's
// last seq, finished replaying, and had every batch acknowledged.
func quiesce(t *testing.T, p *Pipeline, ws []*simWorker) {
	t.Helper()
	for _, w := range ws {
		if err := w.eng.Publish(); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		prev := ^uint64(0)
		eventually.True(t, fmt.Sprintf("worker %d quiescent", w.stream.Worker), func() (bool, string) {
			st, err := p.ListenerStats(w.stream, time.Second)
			if err != nil {
				return false, err.Error()
			}
			want := w.eng.Stats().NextSeq
			if st.NextSeq != want && !st.Replaying && (st.Received == 0 || st.NextSeq == prev) {
				// Stalled behind the engine: nothing heard (the subscription
				// reached the engine's PUB after all it published — a PUB
				// drops what it sends before), or the last batch lost. A
				// heartbeat shows the listener where the engine is.
				if err := w.eng.Publish(); err != nil {
					t.Fatal(err)
				}
			}
			prev = st.NextSeq
			return st.NextSeq == want && !st.Replaying && st.InFlight == 0,
				fmt.Sprintf("next %d (engine %d) replaying %v in flight %d resyncs %v replays %v",
					st.NextSeq, want, st.Replaying, st.InFlight, st.Resyncs, st.Replays)
		})
	}
}

func startSims(t *testing.T, ws []*simWorker) *Pipeline {
	t.Helper()
	p := mustStart(t, Config{})
	for _, w := range ws {
		if err := p.AddListener(w.cfg); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the subscriptions (the PUB drops until a SUB is there; the
	// replay repairs that, but the test wants live traffic to flow).
	for _, w := range ws {
		eventually.True(t, "subscribed", func() (bool, string) {
			st, err := p.ListenerStats(w.stream, time.Second)
			return err == nil && st.Subscribed > 0, fmt.Sprint(err)
		})
	}
	return p
}

// check compares the index with every engine's cache. exact: equal sets;
// otherwise no phantom block (index ⊆ engine).
func check(t *testing.T, p *Pipeline, ws []*simWorker, wantState string) {
	t.Helper()
	snap, err := p.Snapshot(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	status, err := p.Status(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		got := snap.Blocks[messages.WorkerKey{Worker: w.stream.Worker}]
		truth := w.truth()
		if len(truth) < 10 {
			t.Fatalf("worker %d: the engine holds only %d blocks; the test would prove little", w.stream.Worker, len(truth))
		}
		if state := string(status.Streams[w.stream].State); state != wantState {
			ls, _ := p.ListenerStats(w.stream, time.Second)
			t.Errorf("worker %d: state %s, want %s; listener %+v", w.stream.Worker, state, wantState, ls)
		}
		if wantState == "exact" {
			if !slices.Equal(got, truth) {
				t.Errorf("worker %d: index holds %d blocks, engine %d;\nindex  %v\nengine %v",
					w.stream.Worker, len(got), len(truth), got, truth)
			}
			continue
		}
		for _, h := range got {
			if _, ok := slices.BinarySearch(truth, h); !ok {
				t.Errorf("worker %d: phantom block %d in the index", w.stream.Worker, h)
			}
		}
	}
}

// Several engines of every encoding, a router started after them (it learns
// their history from the replay buffers), then live traffic: the index
// equals the engines' caches exactly.
func TestSimEnginesLateRouterStartExact(t *testing.T) {
	var ws []*simWorker
	for i, enc := range []simengine.Encoding{simengine.EncodingVLLMMap, simengine.EncodingVLLMPositional, simengine.EncodingSGLang} {
		ws = append(ws, newSimWorker(t, i+1, enc, true, simengine.Options{}))
	}
	for _, w := range ws {
		w.serve(t, 30) // before the router exists
	}
	p := startSims(t, ws)
	for _, w := range ws {
		w.serve(t, 30)
	}
	quiesce(t, p, ws)
	check(t, p, ws, "exact")
}

// Batches lost between engine and router are repaired by replay.
func TestSimGapsAreReplayed(t *testing.T) {
	drop := func(seq uint64) bool { return seq%5 == 3 }
	ws := []*simWorker{
		newSimWorker(t, 1, simengine.EncodingVLLMMap, true, simengine.Options{DropSeqs: drop}),
		newSimWorker(t, 2, simengine.EncodingSGLang, true, simengine.Options{DropSeqs: drop, LegacyReplay: true}),
	}
	p := startSims(t, ws)
	for _, w := range ws {
		w.serve(t, 60)
	}
	quiesce(t, p, ws)
	check(t, p, ws, "exact")
	for _, w := range ws {
		st, _ := p.ListenerStats(w.stream, time.Second)
		if st.Replays["ok"] == 0 {
			t.Errorf("worker %d: no replay ran (%v)", w.stream.Worker, st.Replays)
		}
	}
}

// Without a replay endpoint a loss cannot be repaired: the stream is
// cleared and marked degraded, and the index never holds a block the engine
// does not.
func TestSimLossWithoutReplayDegradesWithoutPhantoms(t *testing.T) {
	drop := func(seq uint64) bool { return seq%7 == 4 }
	ws := []*simWorker{newSimWorker(t, 1, simengine.EncodingVLLMMap, false, simengine.Options{DropSeqs: drop})}
	p := startSims(t, ws)
	ws[0].serve(t, 80)
	quiesce(t, p, ws)
	check(t, p, ws, "degraded")
	st, _ := p.ListenerStats(ws[0].stream, time.Second)
	if st.Resyncs["history_missing"] == 0 {
		t.Errorf("resyncs %v: the losses were not noticed", st.Resyncs)
	}
}

// A router started after the replay buffer lost the engine's early history
// is degraded, never wrong.
func TestSimHistoryGoneDegrades(t *testing.T) {
	ws := []*simWorker{newSimWorker(t, 1, simengine.EncodingVLLMMap, true, simengine.Options{ReplayBuffer: 5})}
	ws[0].serve(t, 40)
	p := startSims(t, ws)
	ws[0].serve(t, 20)
	quiesce(t, p, ws)
	check(t, p, ws, "degraded")
}

// An engine restart (seq back to 0, cache and replay buffer gone) clears
// the stream; the index follows the new process exactly.
func TestSimEngineRestart(t *testing.T) {
	ws := []*simWorker{newSimWorker(t, 1, simengine.EncodingVLLMMap, true, simengine.Options{})}
	p := startSims(t, ws)
	ws[0].serve(t, 30)
	quiesce(t, p, ws)
	ws[0].eng.ResetSeq(simengine.ResetOptions{ClearCache: true, ClearReplay: true})
	ws[0].serve(t, 30)
	quiesce(t, p, ws)
	check(t, p, ws, "exact")
	st, _ := p.ListenerStats(ws[0].stream, time.Second)
	if st.Resyncs["restart"] != 1 {
		t.Errorf("resyncs %v, want one restart", st.Resyncs)
	}
}

// TensorRT-LLM numbers batches from a nanosecond timestamp, so the first
// batch heard says nothing about what came before: the stream is degraded
// until the engine clears its cache, then exact.
func TestSimTimestampSeqIsDegradedUntilACacheClear(t *testing.T) {
	w := newSimWorker(t, 1, simengine.EncodingVLLMMap, false, simengine.Options{SeqStart: uint64(time.Now().UnixNano())})
	w.cfg.Engine = "trtllm"
	ws := []*simWorker{w}
	p := startSims(t, ws)
	w.serve(t, 30)
	quiesce(t, p, ws)
	check(t, p, ws, "degraded")
	if err := w.eng.Clear(); err != nil {
		t.Fatal(err)
	}
	w.serve(t, 30)
	quiesce(t, p, ws)
	check(t, p, ws, "exact")
}

// The applied RouterEvents are republished on a ZeroMQ PUB: a consumer
// rebuilds the same per-worker block set from them, with dense ids and the
// engines' session ids.
func TestRouterEventsRepublished(t *testing.T) {
	pubEndpoint := freeEndpoint(t)
	w := newSimWorker(t, 4, simengine.EncodingVLLMMap, true, simengine.Options{})
	p := mustStart(t, Config{PublishRouterEvents: pubEndpoint})
	if err := p.AddListener(w.cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sub := zmq4.NewSub(ctx)
	t.Cleanup(func() { sub.Close() })
	if err := sub.Dial(pubEndpoint); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kvrouter."); err != nil {
		t.Fatal(err)
	}
	// The PUB drops what it publishes before the subscription reaches it.
	eventually.True(t, "the subscription reached the router's PUB", func() (bool, string) {
		st, err := request[*publisher.Stats](p.system, p.publisher, &publisher.StatsRequest{}, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(st.Topics, "kvrouter."), fmt.Sprint("topics ", st.Topics)
	})
	msgs := make(chan zmq4.Msg, 4096)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	w.serve(t, 40)
	quiesce(t, p, []*simWorker{w})
	held := map[messages.ExternalHash]bool{}
	var lastID uint64
	sessions := 0
	deadline := time.After(10 * time.Second)
	for want := w.truth(); ; {
		select {
		case m := <-msgs:
			ev, err := routerevent.Decode(m.Frames[2])
			if err != nil {
				t.Fatalf("republished event does not decode: %v", err)
			}
			if ev.Event.EventID != lastID+1 {
				t.Fatalf("event id %d after %d", ev.Event.EventID, lastID)
			}
			lastID = ev.Event.EventID
			if ev.SessionID != "" {
				sessions++
			}
			switch ev.Event.Kind {
			case messages.KindStored:
				for _, b := range ev.Event.Blocks {
					held[b.BlockHash] = true
				}
			case messages.KindRemoved:
				for _, h := range ev.Event.Removed {
					delete(held, h)
				}
			case messages.KindCleared:
				clear(held)
			}
			got := slices.Sorted(maps.Keys(held))
			if slices.Equal(got, want) {
				if sessions == 0 {
					t.Error("no republished event carried its session id")
				}
				return
			}
		case <-deadline:
			t.Fatalf("consumer state never matched the engine (%d blocks vs %d)", len(held), len(want))
		}
	}
}

// Many engines dial one bound socket (llm-d style); the topic convention
// kv@<pod>@<model> tells them apart, each with its own sequence numbers.
func TestSharedSocketEnginesToldApartByTopic(t *testing.T) {
	endpoint := freeEndpoint(t)
	p := mustStart(t, Config{})
	shared := messages.StreamID{Worker: 999}
	if err := p.AddListener(listener.Config{Stream: shared, Endpoint: endpoint, Bind: true, TopicIdentity: true,
		Pods: map[string]messages.WorkerID{"pod-a": 11}, BlockSize: 4}); err != nil {
		t.Fatal(err)
	}
	var ws []*simWorker
	for i, pod := range []string{"pod-a", "pod-b"} {
		ws = append(ws, newSimWorker(t, 20+i, simengine.EncodingVLLMMap, false,
			simengine.Options{Endpoint: endpoint, Connect: true, Topic: "kv@" + pod + "@llama"}))
	}
	ids := []messages.WorkerID{11, messages.WorkerID(xxh3.HashString("pod-b"))}
	// Heartbeat until both engines are heard, then serve.
	eventually.True(t, "both engines heard", func() (bool, string) {
		for _, w := range ws {
			_ = w.eng.Publish()
		}
		st, err := p.ListenerStats(shared, time.Second)
		return err == nil && len(st.Streams) == 2, fmt.Sprint(st, err)
	})
	for _, w := range ws {
		w.serve(t, 30)
		_ = w.eng.Publish()
	}
	eventually.True(t, "index equals both engines' caches", func() (bool, string) {
		snap, err := p.Snapshot(time.Second)
		if err != nil {
			return false, err.Error()
		}
		for i, w := range ws {
			if !slices.Equal(snap.Blocks[messages.WorkerKey{Worker: ids[i]}], w.truth()) {
				return false, fmt.Sprintf("worker %d: %d blocks vs %d", ids[i], len(snap.Blocks[messages.WorkerKey{Worker: ids[i]}]), len(w.truth()))
			}
		}
		return true, ""
	})
}
