package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// rawEngine is a bare PUB socket that publishes whatever a flood test makes.
type rawEngine struct {
	sock zmq4.Socket
	seq  uint64
}

func newRawEngine(t *testing.T) (*rawEngine, string) {
	t.Helper()
	sock, endpoint := wirefix.BoundPub(t)
	return &rawEngine{sock: sock}, endpoint
}

// send publishes frames as they are.
func (e *rawEngine) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	if err := e.sock.SendMulti(zmq4.NewMsgFrom(frames...)); err != nil {
		t.Fatal(err)
	}
}

// batch publishes a well-framed message with the next seq.
func (e *rawEngine) batch(t *testing.T, payload []byte) {
	t.Helper()
	e.send(t, []byte("kv@"), binary.BigEndian.AppendUint64(nil, e.seq), payload)
	e.seq++
}

func storedPayload(parent uint64, hashes ...uint64) []byte {
	b := wirefix.New().Batch(1, 1).Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(hashes...)
	b.Str("parent_block_hash")
	if parent == 0 {
		b.Nil()
	} else {
		b.Uint(parent, 64)
	}
	toks := make([]uint32, 4*len(hashes))
	for i := range toks {
		toks[i] = uint32(hashes[i/4]*10) + uint32(i%4)
	}
	return b.Str("token_ids").Tokens(toks...).Str("block_size").Uint(4, 0).Nil().Bytes()
}

// storedHeader starts a batch holding one BlockStored map of the given
// entries, type and block_hashes written: the caller appends the rest of
// the entries and the rank.
func storedHeader(entries int) *wirefix.B {
	return wirefix.New().Batch(1, 1).Map(entries).Str("type").Str("BlockStored").Str("block_hashes").Uints(7)
}

// floodPipeline starts a pipeline with one listener dialing a raw engine
// (no replay) and waits until it hears it.
func floodPipeline(t *testing.T) (*pipeline.Pipeline, *rawEngine, messages.StreamID) {
	t.Helper()
	eng, endpoint := newRawEngine(t)
	system := quietSystem(t)
	p, err := pipeline.Start(system, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	stream := messages.StreamID{Worker: 5}
	if err := p.AddListener(listener.Config{Stream: stream, Endpoint: endpoint, BlockSize: 4, Silence: -1}); err != nil {
		t.Fatal(err)
	}
	empty := wirefix.New().Batch(1, 0).Nil().Bytes()
	if err := until(context.Background(), 10*time.Second, 10*time.Millisecond, func() (bool, string) {
		eng.batch(t, empty)
		ls, err := p.ListenerStats(stream, time.Second)
		return err == nil && ls.Received > 0, fmt.Sprint(ls, err)
	}); err != nil {
		t.Fatal("listener never heard the engine: ", err)
	}
	return p, eng, stream
}

// quietSystem is an actor system whose logs are discarded, shut down at
// cleanup.
func quietSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	t.Cleanup(system.Shutdown)
	return system
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Garbage and oversized messages at full speed: every one is dropped and
// counted by reason, the process stays up, the heap does not keep what the
// flood declared or sent, and a good batch after the flood is applied.
func TestGarbageFloodIsCountedAndBounded(t *testing.T) {
	p, eng, stream := floodPipeline(t)
	before := heapInUse()
	const n = 300
	deep := storedHeader(3).Str("junk").Bytes()
	deep = append(deep, bytes.Repeat([]byte{0x91}, 100_000)...) // 100k nested arrays, skipped unread
	deep = append(deep, 0xc0, 0xc0)                             // the innermost value, the batch's rank
	// Large frames: three of 32 MB (a bin under a key kvrouter does not read,
	// skipped by seeking; the event has no tokens) and one declaring one
	// token id over MaxTokens (each element skipped without being kept).
	bigBin := storedHeader(4).Str("junk").Bin(make([]byte, 32<<20)).Str("block_size").Uint(4, 0).Nil().Bytes()
	manyTokens := wire.DefaultLimits().MaxTokens + 1
	bigTokens := storedHeader(4).Str("token_ids").Array(manyTokens).Bytes()
	bigTokens = append(bigTokens, bytes.Repeat([]byte{0x01}, manyTokens)...)
	bigTokens = wirefix.New().Raw(bigTokens...).Str("block_size").Uint(4, 0).Nil().Bytes()
	for i := range n {
		eng.send(t, []byte("kv@"), []byte{1, 2, 3, 4, 5, 6, 7, 8})                               // two frames
		eng.send(t, []byte("kv@"), []byte{0, 0, 0, 1}, []byte{0x90})                             // 4-byte seq
		eng.batch(t, append([]byte{0xc1}, bytes.Repeat([]byte{byte(i)}, 64)...))                 // not msgpack
		eng.batch(t, wirefix.New().Array(3).F64(1).Raw(0xdd, 0xff, 0xff, 0xff, 0xff).Bytes())    // 4 G events
		eng.batch(t, storedHeader(4).Str("token_ids").Raw(0xdd, 0xff, 0xff, 0xff, 0xff).Bytes()) // 4 G tokens
		eng.batch(t, deep)                                                                       // deep nesting
	}
	for range 3 {
		eng.batch(t, bigBin)
	}
	eng.batch(t, bigTokens)
	eng.batch(t, storedPayload(0, 11, 12))
	key := messages.WorkerKey{Worker: stream.Worker}
	if err := until(context.Background(), 2*time.Minute, 20*time.Millisecond, func() (bool, string) {
		snap, err := p.Snapshot(time.Second)
		ls, _ := p.ListenerStats(stream, time.Second)
		ns, _ := p.NormalizerStats(stream, time.Second)
		return err == nil && slices.Equal(snap.Blocks[key], hashes(11, 12)), fmt.Sprint(snap, err, ls, ns)
	}); err != nil {
		t.Fatal("the good batch after the flood was not applied: ", err)
	}
	ls, err := p.ListenerStats(stream, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := p.NormalizerStats(stream, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rejected := ns.Stream.Rejected
	t.Logf("listener: received %d, delivered %d, bad frames %v; normalizer: bad batches %d, rejected %v",
		ls.Received, ls.Delivered, ls.BadFrames, ns.BadBatches, rejected)
	if ls.BadFrames["frame_count"] != n || ls.BadFrames["seq_frame"] != n {
		t.Errorf("listener bad frames %v, want %d frame_count and %d seq_frame", ls.BadFrames, n, n)
	}
	if ls.Delivered != ls.Received {
		t.Errorf("listener delivered %d of %d well-framed messages", ls.Delivered, ls.Received)
	}
	if ns.BadBatches != 2*n { // not msgpack, 4 G events
		t.Errorf("normalizer: %d bad batches, want %d", ns.BadBatches, 2*n)
	}
	// 4 M tokens; 4 G tokens; deep (its junk skipped, a map event without
	// its required fields); the 32 MB frames
	if rejected[messages.ReasonLimitExceeded] != 1 || rejected[messages.ReasonTruncated] != n ||
		rejected[messages.ReasonMalformed] != n || rejected[messages.ReasonNoTokens] != 3 {
		t.Errorf("normalizer rejections %v, want 1 limit_exceeded, %d truncated, %d malformed, 3 no_tokens", rejected, n, n)
	}
	after := heapInUse()
	t.Logf("heap in use: %d MB before the flood, %d MB after", before>>20, after>>20)
	if after > before+64<<20 {
		t.Errorf("heap in use grew from %d MB to %d MB", before>>20, after>>20)
	}
}
