package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube/kubefake"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// enginePod is a pod whose engine is the simulated one: its KV-event and
// replay ports are the engine's (on loopback).
func enginePod(t *testing.T, name string, eng *simengine.Engine) *corev1.Pod {
	t.Helper()
	port := func(ep string) string {
		u, err := url.Parse(ep)
		if err != nil {
			t.Fatal(err)
		}
		return u.Port()
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: name, Labels: map[string]string{"app": "vllm"},
			Annotations: map[string]string{discovery.KeyKVEventsPort: port(eng.Endpoint()), discovery.KeyReplayPort: port(eng.ReplayEndpoint())}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "engine", Image: "vllm/vllm-openai"}}},
		Status: corev1.PodStatus{PodIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
}

// A pod going Ready is registered and scored by /route; deleted, it is
// gone from /workers and from the index — kvrouter serve's discovery
// (flags → kube.Start → the service) over client-go's fake clientset,
// simulated engines behind the pods' ports.
func TestDiscoveredPodIsRoutedThenGone(t *testing.T) {
	host, err := service.StartHost(actor.NewActorSystem(), service.HostConfig{
		Service: service.Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(host.Close)
	var engines []*simengine.Engine
	for range 2 {
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: 4, CapacityBlocks: 256})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		engines = append(engines, eng)
	}
	client := fake.NewClientset(enginePod(t, "a", engines[0]), enginePod(t, "b", engines[1]))

	df := &discoverFlags{mode: "kubernetes", selector: "app=vllm", namespace: "llm", kvPort: 5557, servingPort: 8000, resync: time.Hour}
	cfg, err := df.config(4, "vllm", "default")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pods = kubefake.Pods(client, "llm")
	disc, err := startDiscovery(*cfg, host.Service, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(disc.Stop)
	h, err := host.Handler(httpapi.Options{}, disc.WriteMetrics)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	a, b := discovery.WorkerID("llm", "a"), discovery.WorkerID("llm", "b")

	if ws := workers(t, srv.URL); len(ws) != 0 {
		t.Fatalf("pods not Ready yet, /workers: %+v", ws)
	}
	for _, name := range []string{"a", "b"} {
		p, err := client.CoreV1().Pods("llm").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions[0].Status = corev1.ConditionTrue
		if _, err := client.CoreV1().Pods("llm").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, "both pods' streams exact", func() (bool, string) {
		for _, e := range engines {
			_ = e.Publish() // heartbeat: a stream is exact once its first batch is in
		}
		ws := workers(t, srv.URL)
		ok := len(ws) == 2
		for _, w := range ws {
			ok = ok && w.Ranks[0].State == api.StateExact && w.Ranks[0].ServingEndpoint == "127.0.0.1:8000"
		}
		return ok, fmt.Sprintf("%+v", ws)
	})

	prompt := make([]uint32, 32)
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}
	engines[0].Serve(prompt, "") // pod a's engine caches the prompt and publishes it
	eventually.True(t, "pod a's blocks in the index", func() (bool, string) {
		q := query(t, srv.URL, prompt)
		return q.Scores[a][0] == uint64(len(prompt)), fmt.Sprintf("%+v", q)
	})
	var r api.RouteResult
	post(t, srv.URL+"/route", map[string]any{"token_ids": prompt, "model_name": "default", "include_scores": true}, &r)
	if r.WorkerID != a || r.OverlapBlocks != uint32(len(prompt)/4) || len(r.Scores) != 2 {
		t.Fatalf("/route: %+v, want pod a (worker %d) with %d overlap blocks among 2 scored", r, a, len(prompt)/4)
	}

	if err := client.CoreV1().Pods("llm").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "pod a gone from /workers and the index", func() (bool, string) {
		ws, q := workers(t, srv.URL), query(t, srv.URL, prompt)
		_, scored := q.Scores[a]
		_, held := q.TreeSizes[a]
		return len(ws) == 1 && ws[0].InstanceID == b && !scored && !held, fmt.Sprintf("workers %+v, query %+v", ws, q)
	})
	// Discovery counts the unregister once its registry write returns,
	// which may be after /workers already shows the pod gone.
	eventually.True(t, "the unregister counted", func() (bool, string) {
		var m strings.Builder
		err := disc.WriteMetrics(&m)
		return err == nil && strings.Contains(m.String(), `kvrouter_discovery_actions_total{op="unregister",result="ok"} 1`),
			fmt.Sprintf("discovery metrics (%v):\n%s", err, m.String())
	})
}

func workers(t *testing.T, base string) []api.WorkerInfo {
	t.Helper()
	var ws []api.WorkerInfo
	get(t, base+"/workers", &ws)
	return ws
}

func query(t *testing.T, base string, tokens []uint32) api.QueryResult {
	t.Helper()
	var q api.QueryResult
	post(t, base+"/query", map[string]any{"token_ids": tokens, "model_name": "default"}, &q)
	return q
}

func get(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, v)
}

func post(t *testing.T, u string, body, v any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, v)
}

func decode(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s: %d %s", resp.Request.URL, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v: %s", resp.Request.URL, err, b)
	}
}
