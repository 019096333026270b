package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube/kubefake"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

const ns = "llm"

var core = discovery.Config{Model: "default", Tenant: "default", BlockSize: 16, Engine: "vllm",
	Engines: []string{"vllm", "sglang", "trtllm"}, KVEventsPort: discovery.DefaultKVPort}

// fakeRegistry is the router's registry as the service keeps it: a
// duplicate registration or an unknown unregistration is refused. Shared
// by the hosts of a cluster test (the replicated registry, converged).
type fakeRegistry struct {
	mu     sync.Mutex
	regs   map[messages.WorkerKey]discovery.Registration
	writes int
	log    []string // "register pod/rank endpoint", "unregister pod/rank"
}

func newRegistry() *fakeRegistry {
	return &fakeRegistry{regs: map[messages.WorkerKey]discovery.Registration{}}
}

func (f *fakeRegistry) Registered() []discovery.Registration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.regs))
}

func (f *fakeRegistry) Register(r discovery.Registration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	f.log = append(f.log, fmt.Sprintf("register %s/%d %s", r.Pod, r.Key.DpRank, r.Endpoint))
	if _, dup := f.regs[r.Key]; dup {
		return fmt.Errorf("worker %d rank %d is already registered", r.Key.Worker, r.Key.DpRank)
	}
	f.regs[r.Key] = r
	return nil
}

func (f *fakeRegistry) Unregister(r discovery.Registration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	f.log = append(f.log, fmt.Sprintf("unregister %s/%d", r.Pod, r.Key.DpRank))
	if _, ok := f.regs[r.Key]; !ok {
		return fmt.Errorf("worker %d rank %d is not registered", r.Key.Worker, r.Key.DpRank)
	}
	delete(f.regs, r.Key)
	return nil
}

// endpoints lists the registered streams as "pod/rank=endpoint", sorted.
func (f *fakeRegistry) endpoints() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.regs {
		out = append(out, fmt.Sprintf("%s/%d=%s", r.Pod, r.Key.DpRank, r.Endpoint))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// waitFor polls until the registry shows want, reporting what it last
// saw (the informers deliver asynchronously).
func waitFor(t *testing.T, f *fakeRegistry, want string) {
	t.Helper()
	eventually.True(t, "registry shows "+want, func() (bool, string) {
		got := f.endpoints()
		return got == want, got
	})
}

func pod(name, ip string, ready bool, lbls map[string]string, ann map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: ann},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.11.0",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}, {Name: "kv-events", ContainerPort: 5557}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func vllm() map[string]string { return map[string]string{"app": "vllm"} }

func start(t *testing.T, cfg Config) *Discovery {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = ns
	}
	cfg.Core = core
	cfg.Resync = time.Hour // changes drive the passes here, not the timer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d
}

func TestPodLifecycle(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(pod("other", "10.0.0.9", true, map[string]string{"app": "web"}, nil))
	reg := newRegistry()
	start(t, Config{Pods: kubefake.Pods(client, ns), Selector: "app=vllm", Registry: reg})
	pods := client.CoreV1().Pods(ns)

	p := pod("a", "10.0.0.5", false, vllm(), nil)
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not Ready: nothing registered (the web pod is not selected).
	waitFor(t, reg, "")
	p.Status.Conditions[0].Status = corev1.ConditionTrue
	update(t, client, p)
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557")

	p.Status.Conditions[0].Status = corev1.ConditionFalse // loses readiness
	update(t, client, p)
	waitFor(t, reg, "")

	p.Status.Conditions[0].Status = corev1.ConditionTrue
	update(t, client, p)
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557")

	p.Status.PodIP = "10.0.0.6" // recreated under the same name
	update(t, client, p)
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.6:5557")
	reg.mu.Lock()
	last := reg.log[len(reg.log)-2:]
	reg.mu.Unlock()
	// The unregistration names the new registration's pod: it removes the
	// key whatever endpoint it had.
	if want := []string{"unregister llm/a/0", "register llm/a/0 tcp://10.0.0.6:5557"}; !slices.Equal(last, want) {
		t.Errorf("the IP change wrote %q, want %q (a re-registration)", last, want)
	}

	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, reg, "")
}

func TestDpSizeExpandsAndShrinks(t *testing.T) {
	client := fake.NewClientset(pod("a", "10.0.0.5", true, vllm(), map[string]string{discovery.KeyDpSize: "4"}))
	reg := newRegistry()
	start(t, Config{Pods: kubefake.Pods(client, ns), Selector: "app=vllm", Registry: reg})
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557 llm/a/1=tcp://10.0.0.5:5558 llm/a/2=tcp://10.0.0.5:5559 llm/a/3=tcp://10.0.0.5:5560")
	p := pod("a", "10.0.0.5", true, vllm(), map[string]string{discovery.KeyDpSize: "2"})
	update(t, client, p)
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557 llm/a/1=tcp://10.0.0.5:5558")
}

func inferencePool(selector map[string]any, ports ...int64) *unstructured.Unstructured {
	tp := make([]any, len(ports))
	for i, p := range ports {
		tp[i] = map[string]any{"number": p}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"namespace": ns, "name": "pool"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": selector}, "targetPorts": tp,
			"endpointPickerRef": map[string]any{"name": "kvrouter", "port": map[string]any{"number": int64(9002)}}},
	}}
	return u
}

func TestInferencePoolSelectorAndPorts(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		pod("a", "10.0.0.5", true, map[string]string{"pool": "a"}, nil),
		pod("b", "10.0.0.6", true, map[string]string{"pool": "b"}, nil))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{PoolResource: "InferencePoolList"},
		inferencePool(map[string]any{"pool": "a"}, 8080))
	reg := newRegistry()
	start(t, Config{Pods: kubefake.Pods(client, ns), Dynamic: dyn, Pool: "pool", Registry: reg})
	waitFor(t, reg, "llm/a/0=tcp://10.0.0.5:5557")
	if got := reg.Registered()[0].ServingEndpoint; got != "10.0.0.5:8080" {
		t.Errorf("serving endpoint %q, want the pool's target port 10.0.0.5:8080", got)
	}

	pools := dyn.Resource(PoolResource).Namespace(ns)
	if _, err := pools.Update(ctx, inferencePool(map[string]any{"pool": "b"}, 8080), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, reg, "llm/b/0=tcp://10.0.0.6:5557")

	if err := pools.Delete(ctx, "pool", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, reg, "")
}

// Two router hosts watch the same pods and write one replicated registry:
// each stream is written once (a second write would be refused and
// counted), by the pod's owner.
func TestTwoHostsWithoutDuplicates(t *testing.T) {
	var objs []runtime.Object
	var want []string
	for i := range 12 {
		name := fmt.Sprintf("p%02d", i)
		objs = append(objs, pod(name, fmt.Sprintf("10.0.0.%d", i+1), true, vllm(), map[string]string{discovery.KeyDpSize: "2"}))
		want = append(want, fmt.Sprintf("llm/%s/0=tcp://10.0.0.%d:5557", name, i+1), fmt.Sprintf("llm/%s/1=tcp://10.0.0.%d:5558", name, i+1))
	}
	slices.Sort(want)
	client := fake.NewClientset(objs...)
	reg := newRegistry()
	members := []string{"10.1.0.1:7000", "10.1.0.2:7000"}
	var hosts []*Discovery
	for _, self := range members {
		owns := func(id messages.WorkerID) bool {
			return registry.Owner(members, messages.WorkerKey{Worker: id}) == self
		}
		hosts = append(hosts, start(t, Config{Pods: kubefake.Pods(client, ns), Selector: "app=vllm", Registry: reg, Owns: owns}))
	}
	waitFor(t, reg, strings.Join(want, " "))
	// Another change reaches both hosts; the registry stays at one write
	// per stream.
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "p00", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, reg, strings.Join(want[2:], " "))
	reg.mu.Lock()
	writes := reg.writes
	reg.mu.Unlock()
	if writes != 24+2 {
		t.Errorf("%d registry writes, want 26 (24 registrations, 2 unregistrations): a host wrote twice", writes)
	}
	for i, h := range hosts {
		if n := h.Last().Failed; len(n) != 0 {
			t.Errorf("host %d: refused actions %v", i, n)
		}
	}
}

func TestBadPodIsCountedNotRegistered(t *testing.T) {
	client := fake.NewClientset(
		pod("bad", "10.0.0.5", true, vllm(), map[string]string{discovery.KeyBlockSize: "sixteen"}),
		pod("good", "10.0.0.6", true, vllm(), nil))
	reg := newRegistry()
	d := start(t, Config{Pods: kubefake.Pods(client, ns), Selector: "app=vllm", Registry: reg})
	waitFor(t, reg, "llm/good/0=tcp://10.0.0.6:5557")
	var b strings.Builder
	if err := d.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`kvrouter_discovery_skipped_pods_total{reason="bad_value"} 1`,
		`kvrouter_discovery_actions_total{op="register",result="ok"} 1`, `kvrouter_discovery_streams 1`} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("metrics lack %q:\n%s", line, b.String())
		}
	}
}

func TestStartRejectsAnUnboundedWatch(t *testing.T) {
	for _, cfg := range []Config{
		{Pods: kubefake.Pods(fake.NewClientset(), ns), Registry: newRegistry()},                        // no selector, no pool
		{Pods: kubefake.Pods(fake.NewClientset(), ns), Registry: newRegistry(), Pool: "p"},             // pool without a dynamic client
		{Pods: kubefake.Pods(fake.NewClientset(), ns), Registry: newRegistry(), Selector: "app in (a"}, // bad selector
	} {
		if _, err := Start(context.Background(), cfg); err == nil {
			t.Errorf("Start(%+v): want an error", cfg)
		}
	}
}

func update(t *testing.T, client *fake.Clientset, p *corev1.Pod) {
	t.Helper()
	if _, err := client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
