//go:build !race

package service

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube/kubefake"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/eventually"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// Two real cluster members (without -race: reach_cluster_test.go says
// why) each run Kubernetes discovery on the same pods, as every host of a
// deployment does: the replicated registry ends with one registration per
// pod, no host's write is refused as a duplicate, each stream is followed
// by exactly one member, and a deleted pod leaves both.
func TestClusterSharesOneDiscovery(t *testing.T) {
	t.Parallel()
	const pods = 6
	var objs []runtime.Object
	for i := range pods {
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: fmt.Sprintf("vllm-%d", i), Labels: map[string]string{"app": "vllm"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm",
				Ports: []corev1.ContainerPort{{Name: "kv-events", ContainerPort: 5557}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("127.0.0.%d", 10+i),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	client := fake.NewClientset(objs...)
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	var ds []*kube.Discovery
	for _, h := range hs {
		reg := h.Service.Discovery()
		ctx, cancel := context.WithTimeout(context.Background(), eventually.Deadline)
		d, err := kube.Start(ctx, kube.Config{Pods: kubefake.Pods(client, "llm"), Namespace: "llm", Selector: "app=vllm", Registry: reg, Owns: reg.Owns(),
			Resync: time.Hour, Core: discovery.Config{Model: "llama", Tenant: api.DefaultTenant, BlockSize: 4,
				Engine: engine.Auto, Engines: engine.Choices(), KVEventsPort: discovery.DefaultKVPort}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Stop)
		ds = append(ds, d)
	}
	followed := func(want int) {
		t.Helper()
		eventually.True(t, fmt.Sprintf("%d pods, each followed by one member", want), func() (bool, string) {
			byKey := map[messages.WorkerKey]int{}
			regs := []int{}
			for _, h := range hs {
				regs = append(regs, len(h.Service.Discovery().Registered()))
				h.Service.mu.Lock()
				for k, w := range h.Service.workers {
					if w.listening {
						byKey[k]++
					}
				}
				h.Service.mu.Unlock()
			}
			ok := len(byKey) == want
			for _, n := range byKey {
				ok = ok && n == 1
			}
			for _, n := range regs {
				ok = ok && n == want
			}
			return ok, fmt.Sprintf("registered per member %v, followers per stream %v", regs, byKey)
		})
	}
	followed(pods)
	if err := client.CoreV1().Pods("llm").Delete(context.Background(), "vllm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	followed(pods - 1)
	for i, d := range ds {
		var m strings.Builder
		if err := d.WriteMetrics(&m); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.String(), `result="error"`) {
			t.Errorf("member %d: a registry write was refused (a duplicate from the other member?):\n%s", i, m.String())
		}
	}
}
