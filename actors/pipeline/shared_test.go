package pipeline

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// Registered pods share one bound socket (AddPod), each engine's PUB
// dialing it with vLLM's kv@<pod_ip>:<port>@<model> topic: each pod's
// blocks land in the index under its own worker, a pod no one registered
// is refused, each pod's listener stats are its own, a crashed shard's
// rebuild finds each pod's stream and the answer names it, and removing
// pods keeps the others flowing until the last one closes the socket.
func TestRegisteredPodsShareOneBoundSocket(t *testing.T) {
	endpoint := freeEndpoint(t)
	p := mustStart(t, Config{})
	pods := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	podConfig := func(worker int) listener.Config {
		return listener.Config{Stream: messages.StreamID{Worker: messages.WorkerID(worker)}, Engine: simengine.EncodingVLLMMap.Engine(),
			Endpoint: endpoint, Bind: true, BlockSize: 4}
	}
	for i, pod := range pods {
		if err := p.AddPod(podConfig(11+i), pod); err != nil {
			t.Fatal(err)
		}
	}
	var ws []*simWorker
	for i, pod := range pods {
		ws = append(ws, newSimWorker(t, 11+i, simengine.EncodingVLLMMap, false,
			simengine.Options{Endpoint: endpoint, Connect: true, Topic: "kv@" + pod + "@llama"}))
	}
	stranger := newSimWorker(t, 13, simengine.EncodingVLLMMap, false,
		simengine.Options{Endpoint: endpoint, Connect: true, Topic: "kv@10.0.0.3:8000@llama"})

	refusals := []struct {
		name string
		err  error
	}{
		{"a pod taken", p.AddPod(podConfig(14), pods[0])},
		{"a stream taken", p.AddPod(podConfig(11), "10.0.0.9:8000")},
		{"another way to read the socket", p.AddPod(listener.Config{Stream: messages.StreamID{Worker: 15}, Endpoint: endpoint, Engine: "sglang", Bind: true}, "10.0.0.9:8000")},
		{"a plain listener on the socket", p.AddListener(listener.Config{Stream: messages.StreamID{Worker: 16}, Endpoint: endpoint, Bind: true})},
	}
	for _, r := range refusals {
		if r.err == nil {
			t.Errorf("%s: accepted", r.name)
		}
	}

	eventually.True(t, "both registered pods heard, the stranger refused", func() (bool, string) {
		for _, w := range append(ws, stranger) {
			_ = w.eng.Publish()
		}
		var last []string
		for _, w := range ws {
			st, err := p.ListenerStats(w.stream, time.Second)
			if err != nil || len(st.Topics) != 1 {
				return false, fmt.Sprint(st, err)
			}
			last = append(last, fmt.Sprint(st.BadFrames))
		}
		whole, err := request[*listener.Stats](p.system, p.listeners[ws[0].stream], &listener.StatsRequest{}, time.Second)
		return err == nil && whole.BadFrames["unknown_pod"] > 0, fmt.Sprint(whole, err, last)
	})
	for _, w := range append(ws, stranger) {
		w.serve(t, 30)
	}
	quiesce(t, p, ws)
	matches := func(ws ...*simWorker) (bool, string) {
		snap, err := p.Snapshot(time.Second)
		if err != nil {
			return false, err.Error()
		}
		for _, w := range ws {
			got := snap.Blocks[messages.WorkerKey{Worker: w.stream.Worker}]
			if !slices.Equal(got, w.truth()) {
				return false, fmt.Sprintf("worker %d: %d blocks vs %d", w.stream.Worker, len(got), len(w.truth()))
			}
		}
		if n := len(snap.Blocks[messages.WorkerKey{Worker: stranger.stream.Worker}]); n > 0 {
			return false, fmt.Sprintf("the stranger's %d blocks in the index", n)
		}
		return true, ""
	}
	eventually.True(t, "index equals both pods' caches, each under its worker", func() (bool, string) { return matches(ws...) })

	ls := p.listenerPIDs()
	for _, w := range ws {
		if ls[w.stream] == nil || ls[w.stream] != ls[ws[0].stream] {
			t.Fatalf("listeners %v: want both pods' streams on the one shared listener", ls)
		}
		res, err := p.system.Root.RequestFuture(ls[w.stream], &listener.Rebuild{Stream: w.stream, Tag: 7}, time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := res.(*listener.Rebuilt); got.Stream != w.stream || got.Tag != 7 {
			t.Errorf("rebuild of %+v answered %+v", w.stream, got)
		}
	}

	if err := p.RemoveListener(ws[1].stream); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ListenerStats(ws[1].stream, time.Second); err == nil {
		t.Error("a removed pod still has listener stats")
	}
	ws[0].serve(t, 10)
	quiesce(t, p, ws[:1])
	eventually.True(t, "the remaining pod still flows", func() (bool, string) { return matches(ws[0]) })

	if err := p.RemoveListener(ws[0].stream); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the last pod's removal closed the socket", func() (bool, string) {
		l, err := net.Listen("tcp", strings.TrimPrefix(endpoint, "tcp://"))
		if err != nil {
			return false, err.Error()
		}
		l.Close()
		return true, ""
	})
}
