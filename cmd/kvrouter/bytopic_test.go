package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// Two --worker registrations share one socket serve binds (bind,by-topic,
// pod=POD), each engine's PUB dialing it with vLLM's topic
// kv@<pod_ip>:<port>@<model>: each pod's blocks land in the index under
// its own worker (GET /workers shows each with its topic_pod and its
// engine's block count, /query scores a pod's prompt for its worker
// only); a third engine whose pod no --worker names is refused (logged,
// reason unknown_pod, counted in kvrouter_shared_socket_refused_messages_total)
// and nothing of it reaches the index; unregistering
// one pod keeps the other flowing.
func TestServeSharesOneBoundSocketByTopic(t *testing.T) {
	endpoint := "tcp://127.0.0.1:" + freePort(t)
	base := "127.0.0.1:" + freePort(t)
	pods := []string{"10.0.0.1:8000", "10.0.0.2:8000"}
	s := serveInProcess(t, "--http", base, "--block-size", "4", "--engine", "vllm",
		"--worker", "1="+endpoint+",bind,by-topic,pod="+pods[0],
		"--worker", "2="+endpoint+",bind,by-topic,pod="+pods[1])
	base = "http://" + base
	eventually.True(t, "serve answers /workers with both pods", func() (bool, string) {
		var ws []api.WorkerInfo
		err := getJSON(base+"/workers", &ws)
		return err == nil && len(ws) == 2, fmt.Sprint(ws, err)
	})
	engine := func(pod string) *simengine.Engine {
		e, err := simengine.New(simengine.Options{Endpoint: endpoint, Connect: true, Topic: "kv@" + pod + "@default",
			BlockSize: 4, CapacityBlocks: 256})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	engs := []*simengine.Engine{engine(pods[0]), engine(pods[1])}
	stranger := engine("10.0.0.3:8000")
	all := append([]*simengine.Engine{stranger}, engs...)

	eventually.True(t, "both pods heard on the shared socket", func() (bool, string) {
		for _, e := range all {
			_ = e.Publish()
		}
		ws := workers(t, base)
		for _, w := range ws {
			if len(w.Ranks) != 1 || w.Ranks[0].LastSeq == nil {
				return false, fmt.Sprint(ws)
			}
		}
		return len(ws) == 2, fmt.Sprint(ws)
	})
	prompts := map[int][]uint32{}
	serveAll := func(round int) {
		for i, e := range all {
			p := make([]uint32, 16)
			for j := range p {
				p[j] = uint32(1000*(i+1) + 100*round + j)
			}
			prompts[i] = p
			e.Serve(p, "")
			if err := e.Publish(); err != nil {
				t.Fatal(err)
			}
		}
	}
	serveAll(0)
	indexed := func(live []*simengine.Engine, ids []messages.WorkerID) func() (bool, string) {
		return func() (bool, string) {
			ws := workers(t, base)
			byID := map[messages.WorkerID]api.RankInfo{}
			for _, w := range ws {
				byID[w.InstanceID] = w.Ranks[0]
			}
			for i, e := range live {
				r, ok := byID[ids[i]]
				if !ok || r.TopicPod != pods[ids[i]-1] || r.Blocks != uint64(e.Stats().Blocks) || r.Blocks == 0 {
					return false, fmt.Sprintf("worker %d: %+v, engine holds %d blocks", ids[i], r, e.Stats().Blocks)
				}
			}
			return len(ws) == len(live), fmt.Sprint(ws)
		}
	}
	eventually.True(t, "each pod's blocks under its own worker", indexed(engs, []messages.WorkerID{1, 2}))
	for i, want := range []messages.WorkerID{1, 2} {
		q := query(t, base, prompts[i+1])
		for w, ranks := range q.Scores {
			if (w == want) != (ranks[0] == uint64(len(prompts[i+1]))) { // scores count tokens
				t.Errorf("pod %s's prompt scores worker %d %d tokens (scores %v)", pods[i], w, ranks[0], q.Scores)
			}
		}
	}
	if q := query(t, base, prompts[0]); len(q.Scores) != 0 {
		t.Errorf("the unregistered pod's prompt scored %v: its blocks reached the index", q.Scores)
	}

	eventually.True(t, "the refusal counted in /metrics", func() (bool, string) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "kvrouter_shared_socket_refused_messages_total{") && strings.Contains(l, `endpoint="`+endpoint+`"`) &&
				strings.Contains(l, `reason="unknown_pod"`) && !strings.HasSuffix(l, " 0") {
				return true, ""
			}
		}
		return false, tail(string(b), 2048)
	})
	if log := s.log.String(); !strings.Contains(log, "reason=unknown_pod") || !strings.Contains(log, "10.0.0.3:8000") {
		t.Errorf("no logged refusal of the unregistered pod (reason unknown_pod) in serve's log:\n%s", tail(log, 4096))
	}

	var out map[string]any
	post(t, base+"/unregister", api.WorkerRef{InstanceID: 2, ModelName: "default"}, &out)
	serveAll(1)
	eventually.True(t, "the remaining pod still flows", indexed(engs[:1], []messages.WorkerID{1}))
}

// getJSON is get without failing the test: for a wait on serve starting.
func getJSON(u string, v any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
