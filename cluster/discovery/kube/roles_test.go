package kube

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube/kubefake"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"k8s.io/client-go/kubernetes/fake"
)

// roles lists the registered streams as "pod=role[:bootstrap]", sorted
// ("both" for the default role).
func (f *fakeRegistry) roles() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.regs {
		s := r.Pod + "=" + r.Role
		if r.Role == "" {
			s = r.Pod + "=both"
		}
		if r.BootstrapPort != 0 {
			s += fmt.Sprintf(":%d", r.BootstrapPort)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Pods get their role from llm-d's label (prefill-decode is both), else
// kvrouter's annotation; an SGLang prefill pod its bootstrap port; a pod
// whose role label changes is re-registered with the new role — it moves
// from one pool to the other; a pod with an unknown role is skipped.
func TestPodRolesFromLabels(t *testing.T) {
	withRole := func(role string) map[string]string {
		l := vllm()
		if role != "" {
			l[discovery.LabelRole] = role
		}
		return l
	}
	client := fake.NewClientset(
		pod("p", "10.0.0.1", true, withRole("prefill"), map[string]string{discovery.KeyBootstrapPort: "8998"}),
		pod("d", "10.0.0.2", true, withRole("decode"), nil),
		pod("pd", "10.0.0.3", true, withRole("prefill-decode"), nil),
		pod("a", "10.0.0.4", true, vllm(), map[string]string{discovery.KeyRole: "decode"}),
		pod("x", "10.0.0.5", true, withRole("encode"), nil),
	)
	reg := newRegistry()
	start(t, Config{Pods: kubefake.Pods(client, ns), Selector: "app=vllm", Registry: reg})
	want := "llm/a=decode llm/d=decode llm/p=prefill:8998 llm/pd=both"
	eventually.True(t, "roles "+want, func() (bool, string) { got := reg.roles(); return got == want, got })

	update(t, client, pod("d", "10.0.0.2", true, withRole("prefill"), nil)) // the decode pod turns prefill
	want = "llm/a=decode llm/d=prefill llm/p=prefill:8998 llm/pd=both"
	eventually.True(t, "roles "+want, func() (bool, string) { got := reg.roles(); return got == want, got })
	reg.mu.Lock()
	last := slices.Clone(reg.log[len(reg.log)-2:])
	reg.mu.Unlock()
	if want := []string{"unregister llm/d/0", "register llm/d/0 tcp://10.0.0.2:5557"}; !slices.Equal(last, want) {
		t.Errorf("the role change wrote %q, want %q (a re-registration)", last, want)
	}
}
