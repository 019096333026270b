package listener_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/zeebo/xxh3"
)

// heardBatch is what the stand-in normalizer got: a stream's batch seq.
type heardBatch struct {
	stream messages.StreamID
	seq    uint64
}

// Real ZeroMQ, llm-d style: one bound SUB, engines' PUBs dialing it with
// vLLM's kv@<pod_ip>:<port>@<model> topics. Each pod is its own stream
// (worker from Pods, else the pod's hash) with its own seqs, delivered in
// its order; a pod past MaxStreams is refused and counted, the tracked
// pods untouched; the per-pod state is in Stats.Topics.
func TestBoundSocketCarriesPodsByTopic(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "tcp://" + l.Addr().String()
	l.Close()

	system := actor.NewActorSystem()
	root := system.Root
	got := make(chan heardBatch, 1024)
	next := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.EngineBatch); ok {
			got <- heardBatch{m.Stream, m.Seq}
			c.Send(m.Listener, &messages.Applied{Stream: m.Stream, Seq: m.Seq, Count: 1})
		}
	}))
	props, err := listener.Props(listener.Config{Stream: messages.StreamID{Worker: 999}, Endpoint: endpoint, Bind: true,
		TopicIdentity: true, Pods: map[string]messages.WorkerID{"10.0.0.1:5557": 11}, MaxStreams: 2, Next: next})
	if err != nil {
		t.Fatal(err)
	}
	pid := root.Spawn(props)
	t.Cleanup(func() { _ = root.StopFuture(pid).Wait(); _ = root.StopFuture(next).Wait() })
	stats := func() *listener.Stats {
		res, err := root.RequestFuture(pid, &listener.StatsRequest{}, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*listener.Stats)
	}
	dial := func(pod string) *simengine.Engine {
		eng, err := simengine.New(simengine.Options{Endpoint: endpoint, Connect: true, Topic: "kv@" + pod + "@llama", BlockSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	pods := []string{"10.0.0.1:5557", "10.0.0.2:5557"}
	engines := []*simengine.Engine{dial(pods[0]), dial(pods[1])}
	ids := []messages.WorkerID{11, messages.WorkerID(xxh3.HashString(pods[1]))}
	eventually.True(t, "both pods heard", func() (bool, string) {
		for _, e := range engines {
			_ = e.Publish()
		}
		s := stats()
		return len(s.Topics) == 2, fmt.Sprintf("%+v", s)
	})
	third := dial("10.0.0.3:5557")
	eventually.True(t, "a third pod refused at the cap", func() (bool, string) {
		_ = third.Publish()
		s := stats()
		return s.BadFrames["too_many_streams"] > 0 && len(s.Topics) == 2, fmt.Sprintf("%+v", s)
	})

	for range 5 {
		for _, e := range engines {
			e.Serve([]uint32{1, 2, 3, 4, 5, 6, 7, 8}, "")
			if err := e.Publish(); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[messages.StreamID]uint64{}
	for i, e := range engines {
		want[messages.StreamID{Worker: ids[i]}] = e.Stats().NextSeq
	}
	last := map[messages.StreamID]uint64{}
	seen := map[messages.StreamID]bool{}
	eventually.True(t, "every pod's batches delivered, each pod in its own seq order", func() (bool, string) {
		for {
			select {
			case b := <-got:
				if _, known := want[b.stream]; !known {
					t.Fatalf("a batch of stream %+v, not one of the two pods'", b.stream)
				}
				if seen[b.stream] && b.seq != last[b.stream]+1 {
					t.Fatalf("stream %+v: seq %d after %d", b.stream, b.seq, last[b.stream])
				}
				seen[b.stream], last[b.stream] = true, b.seq
			default:
				for s, n := range want {
					if !seen[s] || last[s] != n-1 {
						return false, fmt.Sprintf("delivered up to %v, want %v", last, want)
					}
				}
				return true, ""
			}
		}
	})
	s := stats()
	for i, ts := range s.Topics {
		if ts.Pod != pods[i] || ts.Stream.Worker != ids[i] || ts.NextSeq != want[ts.Stream] || ts.Received == 0 ||
			ts.Topic != "kv@"+pods[i]+"@llama" {
			t.Errorf("pod %d state %+v", i, ts)
		}
	}
}
