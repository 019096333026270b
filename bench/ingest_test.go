package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/bench/loadgen"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/bench/traces"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// tracePath is the embedded Mooncake conversation trace.
const tracePath = traces.BuiltinPrefix + traces.Conversation

// engineLoad is one simulated engine's batches, encoded ahead of time so
// the measurement covers only ZeroMQ receive → index apply.
type engineLoad struct {
	payloads [][]byte
	blocks   int // stored blocks in all payloads
}

// prepareLoads splits the first requests of the Mooncake conversation trace
// round-robin over engines (16 tokens per hash id), serves them on
// simulated caches and encodes every resulting batch as vLLM 0.26 does.
// With sessions, each request carries its inferred conversation as its
// session id (loadgen.InferSessions), and its stored blocks are tagged so.
func prepareLoads(b testing.TB, engines, requests, blockSize int, sessions bool) []engineLoad {
	reqs, err := loadgen.LoadTrace(tracePath, loadgen.TraceOptions{TokensPerBlock: blockSize, Limit: requests})
	if err != nil {
		b.Fatal(err)
	}
	loads := make([]engineLoad, engines)
	caches := make([]*simengine.Cache, engines)
	enc, _ := simengine.NewEncoder(simengine.EncodingVLLMMap)
	for i := range caches {
		caches[i], _ = simengine.NewCache(simengine.Config{BlockSize: blockSize, CapacityBlocks: 1 << 16, HashSeed: uint64(i)})
	}
	for i, r := range reqs {
		e := i % engines
		req := simengine.Request{Tokens: r.Tokens}
		if sessions {
			req.SessionID = r.Session
		}
		_, events := caches[e].ServeRequest(req)
		if len(events) == 0 {
			continue
		}
		for _, ev := range events {
			if ev.Kind == simengine.EventStored {
				loads[e].blocks += len(ev.Hashes)
			}
		}
		payload, err := enc.Encode(simengine.Batch{TS: float64(i), Events: events})
		if err != nil {
			b.Fatal(err)
		}
		loads[e].payloads = append(loads[e].payloads, payload)
	}
	return loads
}

func freeEndpoint(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return "tcp://" + l.Addr().String()
}

// BenchmarkIngest8Engines measures end-to-end ingest: 8 engine PUB sockets
// publish pre-encoded batches as fast as they can; the figure is stored
// blocks applied to the index per second, from the first send to the last
// batch acknowledged. A run in which any stream had to resync is invalid
// (the pipeline fell behind and the engines' PUBs dropped).
func BenchmarkIngest8Engines(b *testing.B) {
	const engines, requests, blockSize = 8, 12000, 16
	loads := prepareLoads(b, engines, requests, blockSize, false)
	for _, shards := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			benchIngest(b, loads, blockSize, indexer.Config{Shards: shards})
		})
	}
}

func benchIngest(b *testing.B, loads []engineLoad, blockSize int, index indexer.Config) {
	engines := len(loads)
	total := 0
	for _, l := range loads {
		total += l.blocks
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		ctx, cancel := context.WithCancel(context.Background())
		p, err := pipeline.Start(actor.NewActorSystem(), pipeline.Config{Index: index})
		if err != nil {
			b.Fatal(err)
		}
		pubs := make([]zmq4.Socket, engines)
		for i := range pubs {
			ep := freeEndpoint(b)
			pubs[i] = zmq4.NewPub(ctx)
			if err := pubs[i].Listen(ep); err != nil {
				b.Fatal(err)
			}
			_ = pubs[i].SetOption(zmq4.OptionHWM, 1<<20)
			if err := p.AddListener(listener.Config{Stream: messages.StreamID{Worker: messages.WorkerID(i + 1)},
				Endpoint: ep, BlockSize: blockSize, Silence: -1}); err != nil {
				b.Fatal(err)
			}
		}
		waitSubscribed(b, p, pubs)
		b.StartTimer()
		start := time.Now()
		done := make(chan struct{}, engines)
		for i := range pubs {
			go func(sock zmq4.Socket, payloads [][]byte) {
				for s, payload := range payloads {
					seq := binary.BigEndian.AppendUint64(nil, uint64(s+1)) // seq 0 was the probe
					_ = sock.Send(zmq4.NewMsgFrom(nil, seq, payload))
				}
				done <- struct{}{}
			}(pubs[i], loads[i].payloads)
		}
		for range pubs {
			<-done
		}
		resyncs := waitApplied(b, p, loads)
		elapsed := time.Since(start)
		b.StopTimer()
		if resyncs > engines { // each stream resyncs once, at its first batch
			b.Logf("INVALID run: %d resyncs (the pipeline fell behind)", resyncs)
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "blocks/s")
		b.ReportMetric(float64(total), "blocks")
		p.Stop()
		for _, s := range pubs {
			s.Close()
		}
		cancel()
		b.StartTimer()
	}
}

// waitSubscribed publishes seq 0 probes until every listener heard one.
func waitSubscribed(b *testing.B, p *pipeline.Pipeline, pubs []zmq4.Socket) {
	probe := []byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00} // [0.0, [], 0]
	for i, s := range pubs {
		stream := messages.StreamID{Worker: messages.WorkerID(i + 1)}
		eventually.True(b, fmt.Sprintf("listener %d hears its engine", i+1), func() (bool, string) {
			_ = s.Send(zmq4.NewMsgFrom(nil, make([]byte, 8), probe))
			st, err := p.ListenerStats(stream, time.Second)
			return err == nil && st.Received > 0, fmt.Sprint(st, err)
		})
	}
}

// waitApplied waits until every listener delivered its last seq and has
// nothing in flight; it returns the resyncs seen in all.
func waitApplied(b *testing.B, p *pipeline.Pipeline, loads []engineLoad) int {
	resyncs := 0
	for i, l := range loads {
		stream := messages.StreamID{Worker: messages.WorkerID(i + 1)}
		var st *listener.Stats
		eventually.Within(b, 60*time.Second, fmt.Sprintf("listener %d applied", i+1), func() (bool, string) {
			var err error
			st, err = p.ListenerStats(stream, time.Second)
			return err == nil && st.NextSeq == uint64(len(l.payloads)+1) && st.InFlight == 0, fmt.Sprintf("%+v %v", st, err)
		})
		for _, n := range st.Resyncs {
			resyncs += int(n)
		}
	}
	return resyncs
}
