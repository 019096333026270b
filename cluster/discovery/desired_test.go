package discovery

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

var testCfg = Config{Model: "default", Tenant: "default", BlockSize: 16, Engine: "vllm",
	Engines: []string{"auto", "vllm", "sglang", "trtllm"}, KVEventsPort: DefaultKVPort}

// vllmPod is a Ready pod as a vLLM deployment lays it out.
func vllmPod(name, ip string, mods ...func(*Pod)) Pod {
	p := Pod{Namespace: "llm", Name: name, IP: ip, Ready: true,
		Labels:      map[string]string{"app": "vllm"},
		Annotations: map[string]string{},
		Ports:       []Port{{Name: "http", Number: 8000}, {Name: "kv-events", Number: 5557}}}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func annotate(k, v string) func(*Pod) { return func(p *Pod) { p.Annotations[k] = v } }
func label(k, v string) func(*Pod)    { return func(p *Pod) { p.Labels[k] = v } }

func TestDesired(t *testing.T) {
	id := WorkerID("llm", "a")
	key := func(r int) messages.WorkerKey { return messages.WorkerKey{Worker: id, DpRank: messages.DpRank(r)} }
	base := Registration{Key: key(0), Model: "default", Tenant: "default", BlockSize: 16, Engine: "vllm",
		Endpoint: "tcp://10.0.0.5:5557", ServingEndpoint: "10.0.0.5:8000", Pod: "llm/a"}
	with := func(f func(*Registration)) Registration { r := base; f(&r); return r }
	pool := &Pool{Selector: map[string]string{"app": "vllm"}, TargetPorts: []int32{8080}}
	cases := []struct {
		name  string
		pods  []Pod
		pool  *Pool
		want  []Registration
		skips []Reason
	}{
		{name: "ready pod, vLLM defaults", pods: []Pod{vllmPod("a", "10.0.0.5")}, want: []Registration{base}},
		{name: "not ready", pods: []Pod{vllmPod("a", "10.0.0.5", func(p *Pod) { p.Ready = false })}},
		{name: "being deleted", pods: []Pod{vllmPod("a", "10.0.0.5", func(p *Pod) { p.Deleting = true })}},
		{name: "no IP yet", pods: []Pod{vllmPod("a", "")}},
		{name: "no kv-events port name: the default port",
			pods: []Pod{vllmPod("a", "10.0.0.5", func(p *Pod) { p.Ports = nil })}, want: []Registration{base}},
		{name: "named ports elsewhere", pods: []Pod{vllmPod("a", "10.0.0.5", func(p *Pod) {
			p.Ports = []Port{{Name: "http", Number: 9000}, {Name: "kv-events", Number: 6000}, {Name: "kv-replay", Number: 6100}}
		})}, want: []Registration{with(func(r *Registration) {
			r.Endpoint, r.ReplayEndpoint, r.ServingEndpoint = "tcp://10.0.0.5:6000", "tcp://10.0.0.5:6100", "10.0.0.5:9000"
		})}},
		{name: "annotations: port numbers and names", pods: []Pod{vllmPod("a", "10.0.0.5",
			annotate(KeyKVEventsPort, "7000"), annotate(KeyReplayPort, "http"), annotate(KeyServingPort, "7100"))},
			want: []Registration{with(func(r *Registration) {
				r.Endpoint, r.ReplayEndpoint, r.ServingEndpoint = "tcp://10.0.0.5:7000", "tcp://10.0.0.5:8000", "10.0.0.5:7100"
			})}},
		{name: "metrics port by number, default path", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyMetricsPort, "9400"))},
			want: []Registration{with(func(r *Registration) { r.MetricsEndpoint = "http://10.0.0.5:9400/metrics" })}},
		{name: "metrics path on the serving port", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyMetricsPath, "/prometheus/metrics"))},
			want: []Registration{with(func(r *Registration) { r.MetricsEndpoint = "http://10.0.0.5:8000/prometheus/metrics" })}},
		{name: "metrics port by container port name", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyMetricsPort, "kv-events"),
			annotate(KeyMetricsPath, "/m"))},
			want: []Registration{with(func(r *Registration) { r.MetricsEndpoint = "http://10.0.0.5:5557/m" })}},
		{name: "metrics port the pod does not have", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyMetricsPort, "prom"))},
			skips: []Reason{ReasonNoPort}},
		{name: "metrics path not a path", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyMetricsPath, "metrics?x=1"))},
			skips: []Reason{ReasonBadValue}},
		{name: "model, tenant, block size from annotations and labels", pods: []Pod{vllmPod("a", "10.0.0.5",
			annotate(KeyModel, "meta-llama/Llama-3.1-8B"), label(KeyModel, "ignored"), label(KeyTenant, "team-a"), label(KeyBlockSize, "64"))},
			want: []Registration{with(func(r *Registration) { r.Model, r.Tenant, r.BlockSize = "meta-llama/Llama-3.1-8B", "team-a", 64 })}},
		{name: "dp size: consecutive ports per rank", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyDpSize, "3"), annotate(KeyReplayPort, "5600"))},
			want: []Registration{
				with(func(r *Registration) { r.ReplayEndpoint = "tcp://10.0.0.5:5600" }),
				with(func(r *Registration) {
					r.Key, r.Endpoint, r.ReplayEndpoint = key(1), "tcp://10.0.0.5:5558", "tcp://10.0.0.5:5601"
				}),
				with(func(r *Registration) {
					r.Key, r.Endpoint, r.ReplayEndpoint = key(2), "tcp://10.0.0.5:5559", "tcp://10.0.0.5:5602"
				}),
			}},
		{name: "pool: selector and target port", pool: pool,
			pods: []Pod{vllmPod("a", "10.0.0.5"), vllmPod("b", "10.0.0.6", label("app", "other"))},
			want: []Registration{with(func(r *Registration) { r.ServingEndpoint = "10.0.0.5:8080" })}},
		{name: "pool: one target port per rank", pool: &Pool{Selector: pool.Selector, TargetPorts: []int32{8000, 8001}},
			pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyDpSize, "2"))},
			want: []Registration{base, with(func(r *Registration) {
				r.Key, r.Endpoint, r.ServingEndpoint = key(1), "tcp://10.0.0.5:5558", "10.0.0.5:8001"
			})}},
		{name: "pool: the serving annotation wins", pool: pool, pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyServingPort, "9999"))},
			want: []Registration{with(func(r *Registration) { r.ServingEndpoint = "10.0.0.5:9999" })}},
		{name: "pool with an empty selector selects nothing", pool: &Pool{}, pods: []Pod{vllmPod("a", "10.0.0.5")}},
		{name: "engine from the label", pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyEngine, "trtllm"))},
			want: []Registration{with(func(r *Registration) { r.Engine = "trtllm" })}},
		{name: "engine auto from the label", pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyEngine, "auto"))},
			want: []Registration{with(func(r *Registration) { r.Engine = "auto" })}},
		{name: "IPv6", pods: []Pod{vllmPod("a", "fd00::5")}, want: []Registration{with(func(r *Registration) {
			r.Endpoint, r.ServingEndpoint = "tcp://[fd00::5]:5557", "[fd00::5]:8000"
		})}},
		{name: "bad block size", pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyBlockSize, "abc")), vllmPod("b", "10.0.0.6")},
			want:  []Registration{{Key: messages.WorkerKey{Worker: WorkerID("llm", "b")}, Model: "default", Tenant: "default", BlockSize: 16, Engine: "vllm", Endpoint: "tcp://10.0.0.6:5557", ServingEndpoint: "10.0.0.6:8000", Pod: "llm/b"}},
			skips: []Reason{ReasonBadValue}},
		{name: "dp size 0", pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyDpSize, "0"))}, skips: []Reason{ReasonBadValue}},
		{name: "dp size past the bound", pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyDpSize, "257"))}, skips: []Reason{ReasonBadValue}},
		{name: "ranks past port 65535", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyKVEventsPort, "65535"), label(KeyDpSize, "2"))}, skips: []Reason{ReasonBadValue}},
		{name: "unknown engine", pods: []Pod{vllmPod("a", "10.0.0.5", label(KeyEngine, "llamacpp"))}, skips: []Reason{ReasonBadValue}},
		{name: "annotated port the pod lacks", pods: []Pod{vllmPod("a", "10.0.0.5", annotate(KeyKVEventsPort, "zmq"))}, skips: []Reason{ReasonNoPort}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, skips := Desired(testCfg, c.pods, c.pool)
			if len(got) != len(c.want) {
				t.Fatalf("registrations:\n got %+v\nwant %+v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("registration %d:\n got %+v\nwant %+v", i, got[i], c.want[i])
				}
			}
			if len(skips) != len(c.skips) {
				t.Fatalf("skips: got %+v, want reasons %v", skips, c.skips)
			}
			for i, s := range skips {
				if s.Reason != c.skips[i] || s.Detail == "" {
					t.Errorf("skip %d: got %+v, want reason %s with a detail", i, s, c.skips[i])
				}
			}
		})
	}
}

func TestWorkerIDStableAndInRange(t *testing.T) {
	a, b := WorkerID("llm", "a"), WorkerID("llm", "b")
	if a != WorkerID("llm", "a") || a == b || WorkerID("llm", "a") == WorkerID("llm-a", "") {
		t.Fatalf("ids: %d %d", a, b)
	}
	for _, id := range []messages.WorkerID{a, b} {
		if !Discovered(id) || id >= 1<<53 {
			t.Errorf("id %d: want in [2^52, 2^53)", id)
		}
	}
	for _, id := range []messages.WorkerID{0, 1, 1<<52 - 1, 1 << 53} {
		if Discovered(id) {
			t.Errorf("id %d: not discovery's", id)
		}
	}
}

func TestDesiredCollisionSkipsBoth(t *testing.T) {
	same := func(string, string) messages.WorkerID { return 1<<52 | 7 }
	pods := []Pod{vllmPod("a", "10.0.0.5"), vllmPod("b", "10.0.0.6"), vllmPod("c", "10.0.0.7")}
	collide := func(ns, name string) messages.WorkerID {
		if name == "c" {
			return WorkerID(ns, name)
		}
		return same(ns, name)
	}
	regs, skips := desired(testCfg, pods, nil, collide)
	if len(regs) != 1 || regs[0].Pod != "llm/c" {
		t.Fatalf("registrations: got %+v, want llm/c's only", regs)
	}
	if len(skips) != 2 || skips[0].Pod != "llm/a" || skips[1].Pod != "llm/b" ||
		skips[0].Reason != ReasonIDCollision || skips[1].Reason != ReasonIDCollision {
		t.Fatalf("skips: got %+v, want llm/a and llm/b as id collisions", skips)
	}
}
