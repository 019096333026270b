package simengine

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// index is what a router learns from one engine's stream: engine hash →
// local hash, built from decoded, normalized events.
type index struct {
	t    *testing.T
	dec  *wire.Decoder
	norm *normalizer.Normalizer
	held map[uint64]uint64
}

func newIndex(t *testing.T, enc Encoding, bs int) *index {
	a, err := engine.Lookup(enc.Engine())
	if err != nil {
		t.Fatal(err)
	}
	return &index{t: t, dec: a.NewDecoder(wire.DefaultLimits()),
		norm: normalizer.New(normalizer.Config{Worker: 1, BlockSize: bs}), held: make(map[uint64]uint64)}
}

func (x *index) apply(payload []byte) {
	x.t.Helper()
	b, err := x.dec.Decode(payload)
	if err != nil {
		x.t.Fatalf("decode: %v", err)
	}
	for _, o := range x.norm.Batch(b, nil) {
		if !o.Accepted() {
			x.t.Fatalf("event rejected: %v %s", o.Reason, o.Detail)
		}
		switch ev := o.Event.Event; ev.Kind {
		case messages.KindCleared:
			clear(x.held)
		case messages.KindRemoved:
			for _, h := range ev.Removed {
				delete(x.held, uint64(h))
			}
		case messages.KindStored:
			for _, blk := range ev.Blocks {
				x.held[uint64(blk.BlockHash)] = uint64(blk.TokensHash)
			}
		}
	}
}

// equal checks the index against an engine's ground truth.
func (x *index) equal(s Snapshot, bs int) {
	x.t.Helper()
	if len(x.held) != len(s.Blocks) {
		x.t.Fatalf("index holds %d blocks, the engine %d", len(x.held), len(s.Blocks))
	}
	var h blockhash.Hasher
	for eh, b := range s.Blocks {
		local := h.Hash(nil, b.Tokens, bs, blockhash.Options{Seed: blockhash.NamespaceSeed(b.LoraName, b.CacheSalt)})
		if got, ok := x.held[eh]; !ok || got != local[0] {
			x.t.Fatalf("block %#x: index has %#x (%v), want local hash %#x", eh, got, ok, local[0])
		}
	}
}

// TestEnginePublishesOverZMQ checks the 3-frame messages, the topic, and
// consecutive seqs on a real SUB, and that a router-side index rebuilt from
// the stream equals the engine's contents — in every encoding.
func TestEnginePublishesOverZMQ(t *testing.T) {
	for _, enc := range Encodings() {
		t.Run(string(enc), func(t *testing.T) {
			const bs = 4
			e := newTestEngine(t, Options{Encoding: enc, Topic: "kv@pod-1@m@odel", BlockSize: bs,
				CapacityBlocks: 40, DpRank: 1, SeqStart: 5}, false)
			if !strings.HasPrefix(e.Endpoint(), "tcp://127.0.0.1:") || strings.HasSuffix(e.Endpoint(), ":0") {
				t.Fatalf("Endpoint() = %q, want the bound port", e.Endpoint())
			}
			sub := subscribe(t, e.Endpoint(), "kv@pod-1@")
			other := subscribe(t, e.Endpoint(), "kv@pod-2@") // filtered out by the PUB
			waitJoined(t, e, sub)

			d, err := NewRandomDriver(RandomConfig{Seed: 3, BlockSize: bs, Prefixes: 4, MaxPrefixBlocks: 8, Sessions: true})
			if err != nil {
				t.Fatal(err)
			}
			idx := newIndex(t, enc, bs)
			next := e.Stats().NextSeq
			for i := 0; i < 60; i++ {
				p, _ := d.Next()
				before := e.Stats().NextSeq
				e.Serve(p.Tokens, p.SessionID)
				if i == 30 {
					if err := e.Clear(); err != nil {
						t.Fatal(err)
					}
				}
				for ; before < e.Stats().NextSeq; before++ {
					m := sub.next(t)
					if seq := seqOf(t, m); seq != next {
						t.Fatalf("seq %d, want %d", seq, next)
					}
					if string(m.Frames[0]) != "kv@pod-1@m@odel" {
						t.Fatalf("topic %q", m.Frames[0])
					}
					next++
					idx.apply(m.Frames[2])
				}
			}
			st := e.Stats()
			if st.Cache.EvictedBlocks == 0 || st.Cache.HitBlocks == 0 {
				t.Fatalf("workload without evictions or hits: %+v", st.Cache)
			}
			idx.equal(e.Contents(), bs)
			if got := e.Contents().DpRank; got != 1 {
				t.Fatalf("Contents().DpRank = %d", got)
			}
			other.quiet(t, 50*time.Millisecond)
		})
	}
}

// replayAll sends a replay request and collects the replies up to the end
// marker, checking the layout of every message.
func replayAll(t *testing.T, dl *receiver, start uint64, legacy bool, topic string) []engine.ReplayReply {
	t.Helper()
	if err := dl.sock.SendMulti(zmq4.NewMsgFrom(engine.ReplayRequest(start)...)); err != nil {
		t.Fatal(err)
	}
	want := 4 // "", topic, seq, payload
	if legacy {
		want = 3
	}
	var out []engine.ReplayReply
	for {
		m := dl.next(t)
		if len(m.Frames) != want || len(m.Frames[0]) != 0 {
			t.Fatalf("replay reply %v: want %d frames after an empty delimiter", m, want)
		}
		r, err := engine.ParseReplayFrames(m.Frames)
		if err != nil {
			t.Fatal(err)
		}
		if r.End {
			endTopic, endSeq, endPayload := m.Frames[1], m.Frames[want-2], m.Frames[want-1]
			if !bytes.Equal(endSeq, bytes.Repeat([]byte{0xff}, 8)) || len(endPayload) != 0 || !legacy && len(endTopic) != 0 {
				t.Fatalf("end marker %v", m)
			}
			return out
		}
		if !legacy && string(r.Topic) != topic {
			t.Fatalf("replay topic %q, want %q", r.Topic, topic)
		}
		out = append(out, r)
	}
}

func TestEngineReplayLayouts(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := "vllm-0.26"
		if legacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) {
			e := newTestEngine(t, Options{Topic: "kv", LegacyReplay: legacy, ReplayBuffer: 6, BlockSize: 2}, true)
			for i := 0; i < 10; i++ {
				e.Serve(seqTokens(i*100, 4), "") // distinct prompts: one batch each
			}
			if e.Stats().NextSeq != 10 {
				t.Fatalf("NextSeq = %d, want 10", e.Stats().NextSeq)
			}
			dl := dealer(t, e.ReplayEndpoint())

			got := replayAll(t, dl, 7, legacy, "kv")
			if len(got) != 3 || got[0].Seq != 7 || got[2].Seq != 9 {
				t.Fatalf("replay from 7: %+v", got)
			}
			// Older than the buffer: only what is held (seq 4…9) comes back.
			got = replayAll(t, dl, 0, legacy, "kv")
			if len(got) != 6 || got[0].Seq != 4 {
				t.Fatalf("replay from 0 with a 6-batch buffer: first seq %d of %d", got[0].Seq, len(got))
			}
			idx := newIndex(t, EncodingVLLMMap, 2)
			for _, r := range got {
				idx.apply(r.Payload)
			}
			if got := replayAll(t, dl, math.MaxUint64-1, legacy, "kv"); len(got) != 0 {
				t.Fatalf("replay from the future returned %d batches", len(got))
			}

			// A malformed request is ignored, and the socket keeps serving.
			if err := dl.sock.SendMulti(zmq4.NewMsgFrom([]byte{}, []byte{1, 2, 3})); err != nil {
				t.Fatal(err)
			}
			dl.quiet(t, 50*time.Millisecond)
			if got := replayAll(t, dl, 9, legacy, "kv"); len(got) != 1 {
				t.Fatalf("replay after a bad request: %d batches", len(got))
			}
			if st := e.Stats(); st.BadReplayRequests != 1 || st.ReplayRequests != 4 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestEngineDropSeqsLeavesAGapThatReplayFills: a dropped batch is missing on
// the SUB (a forward gap) and comes back from replay, byte for byte.
func TestEngineDropSeqsLeavesAGapThatReplayFills(t *testing.T) {
	var drop atomic.Uint64
	drop.Store(math.MaxUint64)
	e := newTestEngine(t, Options{BlockSize: 2, DropSeqs: func(seq uint64) bool { return seq == drop.Load() }}, true)
	sub := subscribe(t, e.Endpoint(), "")
	waitJoined(t, e, sub)
	first := e.Stats().NextSeq
	drop.Store(first + 2)

	for i := 0; i < 5; i++ {
		e.Serve(seqTokens(i*100, 4), "s")
	}
	published := map[uint64][]byte{}
	var seqs []uint64
	for i := 0; i < 4; i++ {
		m := sub.next(t)
		seq := seqOf(t, m)
		seqs = append(seqs, seq)
		published[seq] = m.Frames[2]
	}
	if want := []uint64{first, first + 1, first + 3, first + 4}; !equalSeqs(seqs, want) {
		t.Fatalf("SUB got seqs %v, want %v (a gap at %d)", seqs, want, first+2)
	}
	sub.quiet(t, 50*time.Millisecond)
	if st := e.Stats(); st.Dropped != 1 {
		t.Fatalf("Dropped = %d, want 1", st.Dropped)
	}

	dl := dealer(t, e.ReplayEndpoint())
	got := replayAll(t, dl, first, false, "")
	if len(got) != 5 {
		t.Fatalf("replay returned %d batches, want 5", len(got))
	}
	idx := newIndex(t, EncodingVLLMMap, 2)
	for i, r := range got {
		if r.Seq != first+uint64(i) {
			t.Fatalf("replay seq %d at %d", r.Seq, i)
		}
		if p, ok := published[r.Seq]; ok && !bytes.Equal(p, r.Payload) {
			t.Fatalf("replayed seq %d differs from the published one", r.Seq)
		}
		idx.apply(r.Payload)
	}
	idx.equal(e.Contents(), 2) // the replayed stream, gap filled, is the whole truth
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEngineResetSeqSimulatesARestart(t *testing.T) {
	e := newTestEngine(t, Options{BlockSize: 2, SeqStart: 100}, true)
	sub := subscribe(t, e.Endpoint(), "")
	waitJoined(t, e, sub)
	e.Serve(seqTokens(0, 4), "")
	if seq := seqOf(t, sub.next(t)); seq < 100 {
		t.Fatalf("seq %d below SeqStart", seq)
	}

	e.ResetSeq(ResetOptions{ClearCache: true, ClearReplay: true})
	if n := len(e.Contents().Blocks); n != 0 {
		t.Fatalf("%d blocks after a restart that clears the cache", n)
	}
	if cached := e.Serve(seqTokens(0, 4), ""); cached != 0 {
		t.Fatalf("cached %d after restart", cached)
	}
	if seq := seqOf(t, sub.next(t)); seq != 100 {
		t.Fatalf("first seq after restart %d, want 100 (SeqStart)", seq)
	}
	if got := replayAll(t, dealer(t, e.ReplayEndpoint()), 0, false, ""); len(got) != 1 || got[0].Seq != 100 {
		t.Fatalf("replay after restart: %+v", got)
	}
}

// TestEngineConnectsToABoundSUB is the llm-d style: the router binds, the
// engine dials.
func TestEngineConnectsToABoundSUB(t *testing.T) {
	sub := zmq4.NewSub(context.Background())
	if err := sub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	r := startReceiver(t, sub)
	e, err := New(Options{Endpoint: "tcp://" + sub.Addr().String(), Connect: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	waitJoined(t, e, r)
}

func TestEngineCloseReleasesPortsAndRefusesWork(t *testing.T) {
	e, err := New(Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	dealer(t, e.ReplayEndpoint()) // a connected client must not keep the ports open
	pubAddr := strings.TrimPrefix(e.Endpoint(), "tcp://")
	replayAddr := strings.TrimPrefix(e.ReplayEndpoint(), "tcp://")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, addr := range []string{pubAddr, replayAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %s still held after Close: %v", addr, err)
		}
		l.Close()
	}
	if err := e.Publish(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if _, err := e.ServeRequest(Request{Tokens: seqTokens(0, 32)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("ServeRequest after Close: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Endpoint: "tcp://127.0.0.1:0", Encoding: "json"},
		{Endpoint: "tcp://127.0.0.1:0", BlockSize: -1},
		{Endpoint: "tcp://127.0.0.1:0", ReplayBuffer: -1},
		{Endpoint: "bogus"},
		{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "nope://x"},
	} {
		if e, err := New(o); err == nil {
			e.Close()
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func TestOffsetEndpoint(t *testing.T) {
	for _, c := range []struct {
		in   string
		rank uint32
		want string
		bad  bool
	}{
		{"tcp://*:5557", 0, "tcp://*:5557", false},
		{"tcp://*:5557", 2, "tcp://*:5559", false},
		{"tcp://[::1]:5557", 1, "tcp://[::1]:5558", false},
		{"inproc://cache", 3, "inproc://cache_dp3", false},
		{"tcp://127.0.0.1:0", 3, "tcp://127.0.0.1:0", false},
		{"tcp://host", 1, "", true},
		{"tcp://host:65535", 1, "", true},
	} {
		got, err := OffsetEndpoint(c.in, c.rank)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("OffsetEndpoint(%q, %d) = %q, %v", c.in, c.rank, got, err)
		}
	}
}

func TestRunPacesADriver(t *testing.T) {
	e := newTestEngine(t, Options{BlockSize: 4}, false)
	d, _ := NewRandomDriver(RandomConfig{Seed: 1, BlockSize: 4})
	var statuses atomic.Int32
	err := e.Run(context.Background(), RunConfig{Driver: d, Rate: 2000, Requests: 40, Heartbeat: time.Millisecond,
		Status: func(Stats) { statuses.Add(1) }, StatusEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Cache.Requests != 40 || statuses.Load() == 0 {
		t.Fatalf("requests %d, status calls %d", st.Cache.Requests, statuses.Load())
	}

	// Trace timing: the second request is due a minute later; cancelling
	// returns promptly without serving it.
	tr, _ := NewTraceDriver(strings.NewReader(
		`{"timestamp": 0, "input_length": 20, "output_length": 1, "hash_ids": [1]}`+"\n"+
			`{"timestamp": 60000, "input_length": 20, "output_length": 1, "hash_ids": [2]}`+"\n"), TraceConfig{TokensPerBlock: 16})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.Run(ctx, RunConfig{Driver: tr}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 2*time.Second || e.Stats().Cache.Requests != 41 {
		t.Fatalf("trace run: %v, requests %d", time.Since(start), e.Stats().Cache.Requests)
	}

	bad, _ := NewTraceDriver(strings.NewReader("{not json\n"), TraceConfig{})
	if err := e.Run(context.Background(), RunConfig{Driver: bad}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("Run with a bad trace: %v", err)
	}
}
