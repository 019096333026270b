package listener_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// topicPub is one bound PUB carrying several pods' streams (a forwarder in
// front of the engines): each publish sends a pod's next seq on its topic.
type topicPub struct {
	sock zmq4.Socket
	seqs map[string]uint64
}

func newTopicPub(t *testing.T) (*topicPub, string) {
	t.Helper()
	sock, endpoint := wirefix.BoundPub(t)
	return &topicPub{sock: sock, seqs: map[string]uint64{}}, endpoint
}

// publish sends one batch of each pod's (topic kv@<pod>@llama).
func (p *topicPub) publish(t *testing.T, pods ...string) {
	t.Helper()
	for _, pod := range pods {
		seq := binary.BigEndian.AppendUint64(nil, p.seqs[pod])
		p.seqs[pod]++
		if err := p.sock.Send(zmq4.NewMsgFrom([]byte("kv@"+pod+"@llama"), seq, []byte("batch"))); err != nil {
			t.Fatal(err)
		}
	}
}

// One dialed socket carrying several pods (Config.KnownPodsOnly, as
// kvrouter serve uses it): a pod no one mapped is refused and counted
// (unknown_pod) until AddPod maps it; each pod's view of the stats is its
// own; a Rebuild names the pod's stream it was asked for (the index's
// crashed shard and the cluster's rebuild agent match the answer by it);
// a forgotten pod is refused again and its stream gone.
func TestDialedSocketPodsAddedAndForgotten(t *testing.T) {
	pub, endpoint := newTopicPub(t)
	system := actor.NewActorSystem()
	root := system.Root
	next := root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*messages.EngineBatch); ok {
			c.Send(m.Listener, &messages.Applied{Stream: m.Stream, Seq: m.Seq, Count: 1})
		}
	}))
	const a, b = "10.0.0.1:8000", "10.0.0.2:8000"
	props, err := listener.Props(listener.Config{Stream: messages.StreamID{DpRank: 3}, Endpoint: endpoint,
		TopicIdentity: true, KnownPodsOnly: true, Pods: map[string]messages.WorkerID{a: 11}, Next: next})
	if err != nil {
		t.Fatal(err)
	}
	pid := root.Spawn(props)
	t.Cleanup(func() { _ = root.StopFuture(pid).Wait(); _ = root.StopFuture(next).Wait() })
	ask := func(m any) any {
		t.Helper()
		res, err := root.RequestFuture(pid, m, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	stats := func(pod string) *listener.Stats { return ask(&listener.StatsRequest{Pod: pod}).(*listener.Stats) }

	eventually.True(t, "pod a heard, pod b refused as unknown", func() (bool, string) {
		pub.publish(t, a, b)
		s := stats("")
		return len(s.Topics) == 1 && s.BadFrames["unknown_pod"] > 0, fmt.Sprintf("%+v", s)
	})
	if got := ask(&listener.AddPod{Pod: b, Worker: 12}).(*listener.PodUpdated); got.Pod != b || got.Dropped {
		t.Fatalf("AddPod answered %+v", got)
	}
	eventually.True(t, "pod b heard once added, as worker 12 on the socket's rank", func() (bool, string) {
		pub.publish(t, a, b)
		s := stats(b)
		return len(s.Topics) == 1 && s.Delivered > 0 && s.Topics[0].Stream == (messages.StreamID{Worker: 12, DpRank: 3}), fmt.Sprintf("%+v", s)
	})
	sa, sb, whole := stats(a), stats(b), stats("")
	if sa.Topics[0].Stream.Worker != 11 || sa.Delivered+sb.Delivered > whole.Delivered || sa.BadFrames["unknown_pod"] != 0 ||
		!sa.Connected || sa.Resyncs["start"] != 1 {
		t.Errorf("pod a's view %+v, pod b's %+v, the socket's %+v", sa, sb, whole)
	}

	for _, w := range []messages.WorkerID{11, 12} {
		stream := messages.StreamID{Worker: w, DpRank: 3}
		got := ask(&listener.Rebuild{Stream: stream, Tag: uint64(w)}).(*listener.Rebuilt)
		if got.Stream != stream || got.Tag != uint64(w) || got.Exact {
			t.Errorf("Rebuild of %+v answered %+v: want that stream, tag %d, inexact (no replay on a shared socket)", stream, got, w)
		}
	}

	if got := ask(&listener.ForgetPod{Pod: a}).(*listener.PodUpdated); !got.Dropped {
		t.Fatalf("ForgetPod answered %+v: pod a had a stream", got)
	}
	refused := stats("").BadFrames["unknown_pod"]
	delivered := stats(b).Delivered
	eventually.True(t, "pod a refused again, pod b still delivered", func() (bool, string) {
		pub.publish(t, a, b)
		s, sb := stats(""), stats(b)
		return s.BadFrames["unknown_pod"] > refused && sb.Delivered > delivered && len(s.Topics) == 1 && s.Topics[0].Pod == b,
			fmt.Sprintf("%+v", s)
	})
	if s := stats(a); len(s.Topics) != 0 || s.Delivered != 0 {
		t.Errorf("a forgotten pod's view %+v, want empty", s)
	}
}
