package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

func freeEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("tcp://%s", l.Addr())
}

// enginePub is a bare engine PUB socket for tests.
type enginePub struct {
	sock zmq4.Socket
	seq  uint64
}

func newEnginePub(t *testing.T, endpoint string) *enginePub {
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewPub(ctx)
	if err := sock.Listen(endpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close(); cancel() })
	return &enginePub{sock: sock}
}

func (p *enginePub) send(t *testing.T, payload []byte) {
	t.Helper()
	seq := binary.BigEndian.AppendUint64(nil, p.seq)
	p.seq++
	if err := p.sock.Send(zmq4.NewMsgFrom([]byte("kv@w"), seq, payload)); err != nil {
		t.Fatal(err)
	}
}

func emptyBatch() []byte { return wirefix.New().Batch(1, 0).Uint(0, 0).Bytes() }

func storedBatch(parent uint64, hashes ...uint64) []byte {
	b := wirefix.New().Batch(1, 1).Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(hashes...)
	if parent == 0 {
		b.Str("parent_block_hash").Nil()
	} else {
		b.Str("parent_block_hash").Uint(parent, 64)
	}
	toks := make([]uint32, 2*len(hashes))
	for i := range toks {
		toks[i] = uint32(hashes[i/2]*10) + uint32(i%2)
	}
	b.Str("token_ids").Tokens(toks...).Str("block_size").Uint(2, 0)
	return b.Uint(0, 0).Bytes()
}

func removedBatch(hashes ...uint64) []byte {
	b := wirefix.New().Batch(1, 1).Array(3).Str("BlockRemoved").Uints(hashes...).Nil()
	return b.Uint(0, 0).Bytes()
}

// mustStart starts a pipeline in a new actor system, stopped at cleanup.
func mustStart(t *testing.T, cfg Config) *Pipeline {
	t.Helper()
	p, err := Start(actor.NewActorSystem(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func TestPipelineAppliesEngineEventsInOrder(t *testing.T) {
	endpoint := freeEndpoint(t)
	pub := newEnginePub(t, endpoint)
	pub.seq = 5 // an engine that has been publishing for a while
	p := mustStart(t, Config{})
	stream := messages.StreamID{Worker: 7}
	if err := p.AddListener(listener.Config{Stream: stream, Endpoint: endpoint, Topic: "kv@", Silence: -1}); err != nil {
		t.Fatal(err)
	}
	// Slow joiner: heartbeat until the listener hears one.
	eventually.True(t, "subscription", func() (bool, string) {
		pub.send(t, emptyBatch())
		st, err := p.ListenerStats(stream, time.Second)
		return err == nil && st.Received > 0, fmt.Sprint(st, err)
	})
	pub.send(t, storedBatch(0, 1, 2, 3))
	pub.send(t, storedBatch(3, 4))
	pub.send(t, storedBatch(2, 5))
	pub.send(t, removedBatch(3))
	want := []messages.ExternalHash{1, 2, 5}
	key := messages.WorkerKey{Worker: 7}
	eventually.True(t, "index", func() (bool, string) {
		snap, err := p.Snapshot(time.Second)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(snap.Blocks[key], want), fmt.Sprint(snap.Blocks, snap.Stats)
	})
	st, err := p.Status(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The first batch heard had seq > 0 and there is no replay endpoint:
	// history before it is unknown.
	if got := st.Streams[stream].State; got != "degraded" {
		t.Errorf("state %q, want degraded (joined late without replay)", got)
	}
	ls, _ := p.ListenerStats(stream, time.Second)
	if ls.InFlight != 0 {
		t.Errorf("%d batches never acknowledged", ls.InFlight)
	}
}

// startWithListener starts a pipeline with one listener (no replay) and
// waits until it hears the publisher.
func startWithListener(t *testing.T, cfg listener.Config, pub *enginePub) *Pipeline {
	t.Helper()
	p := mustStart(t, Config{})
	if err := p.AddListener(cfg); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "subscription", func() (bool, string) {
		pub.send(t, emptyBatch())
		st, err := p.ListenerStats(cfg.Stream, time.Second)
		return err == nil && st.Received > 0, fmt.Sprint(st, err)
	})
	return p
}

func TestBadMessagesAreCountedAndTheStreamGoesOn(t *testing.T) {
	endpoint := freeEndpoint(t)
	pub := newEnginePub(t, endpoint)
	stream := messages.StreamID{Worker: 3}
	p := startWithListener(t, listener.Config{Stream: stream, Endpoint: endpoint, Silence: -1}, pub)

	// Two frames; a 4-byte seq; a payload that is not a batch; then a good batch.
	if err := pub.sock.Send(zmq4.NewMsgFrom([]byte("kv@w"), []byte{1})); err != nil {
		t.Fatal(err)
	}
	if err := pub.sock.Send(zmq4.NewMsgFrom([]byte("kv@w"), []byte{0, 0, 0, 1}, emptyBatch())); err != nil {
		t.Fatal(err)
	}
	pub.send(t, []byte{0xc1, 0xff, 0x00})
	pub.send(t, storedBatch(0, 42))
	key := messages.WorkerKey{Worker: 3}
	eventually.True(t, "good batch applied after bad ones", func() (bool, string) {
		snap, err := p.Snapshot(time.Second)
		return err == nil && slices.Equal(snap.Blocks[key], []messages.ExternalHash{42}), fmt.Sprint(snap, err)
	})
	ls, err := p.ListenerStats(stream, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ls.BadFrames["frame_count"] != 1 || ls.BadFrames["seq_frame"] != 1 {
		t.Errorf("bad frames %v", ls.BadFrames)
	}
	if ls.InFlight != 0 {
		t.Errorf("%d batches never acknowledged (a bad payload must still be acknowledged)", ls.InFlight)
	}
}

// An engine without a replay endpoint goes away (a restart): its blocks
// leave the index as soon as the connection breaks, before it publishes
// again — a restarted engine may stay idle, and its new seqs may continue
// ours exactly, so continuity could never be checked later.
func TestALostConnectionWithoutReplayDropsTheStreamAtOnce(t *testing.T) {
	endpoint := freeEndpoint(t)
	pub := newEnginePub(t, endpoint)
	stream := messages.StreamID{Worker: 4}
	p := startWithListener(t, listener.Config{Stream: stream, Endpoint: endpoint, Silence: -1}, pub)
	key := messages.WorkerKey{Worker: 4}
	blocks := func(want ...messages.ExternalHash) func() (bool, string) {
		return func() (bool, string) {
			snap, err := p.Snapshot(time.Second)
			return err == nil && slices.Equal(snap.Blocks[key], want), fmt.Sprint(snap, err)
		}
	}
	pub.send(t, storedBatch(0, 1, 2, 3))
	eventually.True(t, "blocks of the first engine", blocks(1, 2, 3))

	_ = pub.sock.Close()
	eventually.True(t, "state dropped when the connection broke", blocks())
	st, err := p.Status(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Streams[stream].State; got != "degraded" {
		t.Errorf("state %q after the connection broke, want degraded", got)
	}

	// The restarted engine's seqs land exactly where the old ones stopped.
	next := pub.seq
	pub = newEnginePub(t, endpoint)
	pub.seq = next
	before, _ := p.ListenerStats(stream, time.Second)
	eventually.True(t, "resubscription", func() (bool, string) {
		pub.send(t, emptyBatch())
		ls, err := p.ListenerStats(stream, time.Second)
		return err == nil && ls.Received > before.Received, fmt.Sprint(ls, err)
	})
	pub.send(t, storedBatch(0, 7, 8))
	eventually.True(t, "only the new engine's blocks", blocks(7, 8))
	ls, _ := p.ListenerStats(stream, time.Second)
	if ls.Resyncs["disconnected"] != 1 || ls.InFlight != 0 {
		t.Errorf("resyncs %v, in flight %d", ls.Resyncs, ls.InFlight)
	}
}

func TestBoundSubscriberEnginesDialIn(t *testing.T) {
	endpoint := freeEndpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream := messages.StreamID{Worker: 9}
	p := mustStart(t, Config{})
	if err := p.AddListener(listener.Config{Stream: stream, Endpoint: endpoint, Bind: true}); err != nil {
		t.Fatal(err)
	}
	sock := zmq4.NewPub(ctx, zmq4.WithDialerRetry(20*time.Millisecond))
	t.Cleanup(func() { sock.Close() })
	eventually.True(t, "engine dials the router", func() (bool, string) {
		err := sock.Dial(endpoint)
		return err == nil, fmt.Sprint(err)
	})
	pub := &enginePub{sock: sock}
	eventually.True(t, "subscription", func() (bool, string) {
		pub.send(t, emptyBatch())
		st, err := p.ListenerStats(stream, time.Second)
		return err == nil && st.Received > 0, fmt.Sprint(st, err)
	})
	pub.send(t, storedBatch(0, 8, 9))
	eventually.True(t, "index", func() (bool, string) {
		snap, err := p.Snapshot(time.Second)
		return err == nil && slices.Equal(snap.Blocks[messages.WorkerKey{Worker: 9}], []messages.ExternalHash{8, 9}), fmt.Sprint(snap, err)
	})
}
