package discovery

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
)

func reg(id messages.WorkerID, rank int, endpoint string) Registration {
	return Registration{Key: messages.WorkerKey{Worker: id, DpRank: messages.DpRank(rank)}, Model: "default",
		Tenant: "default", BlockSize: 16, Engine: "vllm", Endpoint: endpoint, ServingEndpoint: "x:8000"}
}

func TestPlan(t *testing.T) {
	a, b, c := WorkerID("llm", "a"), WorkerID("llm", "b"), WorkerID("llm", "c")
	manual := messages.WorkerID(7)
	moved := reg(b, 0, "tcp://10.0.0.9:5557")
	first, second := reg(a, 0, "tcp://a"), reg(c, 0, "tcp://c")
	if c < a {
		first, second = second, first
	}
	cases := []struct {
		name                string
		desired, registered []Registration
		want                []Action
	}{
		{name: "nothing"},
		{name: "new pod", desired: []Registration{reg(a, 0, "tcp://a")},
			want: []Action{{OpRegister, reg(a, 0, "tcp://a")}}},
		{name: "in step", desired: []Registration{reg(a, 0, "tcp://a")}, registered: []Registration{reg(a, 0, "tcp://a")}},
		{name: "the pod label is not compared", desired: []Registration{func() Registration { r := reg(a, 0, "tcp://a"); r.Pod = "llm/a"; return r }()},
			registered: []Registration{reg(a, 0, "tcp://a")}},
		{name: "gone pod", registered: []Registration{reg(a, 0, "tcp://a"), reg(a, 1, "tcp://a1")},
			want: []Action{{OpUnregister, reg(a, 0, "tcp://a")}, {OpUnregister, reg(a, 1, "tcp://a1")}}},
		{name: "hand-made registrations are left alone", registered: []Registration{reg(manual, 0, "tcp://m")}},
		{name: "IP change", desired: []Registration{moved}, registered: []Registration{reg(b, 0, "tcp://10.0.0.6:5557")},
			want: []Action{{OpReregister, moved}}},
		{name: "dp size shrinks", desired: []Registration{reg(a, 0, "tcp://a")},
			registered: []Registration{reg(a, 0, "tcp://a"), reg(a, 1, "tcp://a1")},
			want:       []Action{{OpUnregister, reg(a, 1, "tcp://a1")}}},
		{name: "order: unregister, reregister, register, each by key",
			desired:    []Registration{reg(c, 0, "tcp://c"), moved, reg(a, 0, "tcp://a")},
			registered: []Registration{reg(b, 0, "tcp://old"), reg(WorkerID("llm", "z"), 0, "tcp://z"), reg(manual, 0, "tcp://m")},
			want: []Action{{OpUnregister, reg(WorkerID("llm", "z"), 0, "tcp://z")}, {OpReregister, moved},
				{OpRegister, first}, {OpRegister, second}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.desired, tc.registered)
			if !slices.EqualFunc(got, tc.want, func(x, y Action) bool { return x.Op == y.Op && x.Reg == y.Reg }) {
				t.Fatalf("plan:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// fakeRegistry is the replicated registry as two hosts see it at once: one
// table, conflicts reported as the service reports them.
type fakeRegistry struct {
	regs   map[messages.WorkerKey]Registration
	writes map[string]int
}

func (f *fakeRegistry) list() []Registration {
	out := make([]Registration, 0, len(f.regs))
	for _, r := range f.regs {
		out = append(out, r)
	}
	return out
}

func (f *fakeRegistry) apply(host string, as []Action) error {
	for _, a := range as {
		f.writes[host]++
		_, exists := f.regs[a.Reg.Key]
		switch a.Op {
		case OpRegister:
			if exists {
				return fmt.Errorf("%s: %v already registered", host, a.Reg.Key)
			}
			f.regs[a.Reg.Key] = a.Reg
		case OpReregister:
			f.regs[a.Reg.Key] = a.Reg
		case OpUnregister:
			if !exists {
				return fmt.Errorf("%s: %v is not registered", host, a.Reg.Key)
			}
			delete(f.regs, a.Reg.Key)
		}
	}
	return nil
}

// Two router hosts watching the same pods and writing one registry: each
// pod is written once, by its owner; nothing is left to do for the other;
// when the owner leaves, the survivor takes over without writing again,
// and still removes what the departed host had registered.
func TestTwoHostsShareDiscovery(t *testing.T) {
	var pods []Pod
	for i := range 20 {
		pods = append(pods, vllmPod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.0.%d", i+1), label(KeyDpSize, "2")))
	}
	members := []string{"10.1.0.1:7000", "10.1.0.2:7000"}
	owns := func(self string, members []string) func(messages.WorkerID) bool {
		return func(id messages.WorkerID) bool {
			return registry.Owner(members, messages.WorkerKey{Worker: id}) == self
		}
	}
	f := &fakeRegistry{regs: map[messages.WorkerKey]Registration{}, writes: map[string]int{}}
	pass := func(host string, members []string) int {
		want, _ := Desired(testCfg, pods, nil)
		as := Mine(Plan(want, f.list()), owns(host, members))
		if err := f.apply(host, as); err != nil {
			t.Fatal(err)
		}
		return len(as)
	}
	for round := range 3 { // both hosts pass, repeatedly, in either order
		pass(members[round%2], members)
		pass(members[(round+1)%2], members)
	}
	if len(f.regs) != 40 || f.writes[members[0]]+f.writes[members[1]] != 40 {
		t.Fatalf("registered %d streams in %v writes, want 40 in 40", len(f.regs), f.writes)
	}
	if f.writes[members[0]] == 0 || f.writes[members[1]] == 0 {
		t.Errorf("writes %v: want both hosts to own some pods", f.writes)
	}
	// Host 0 leaves; pods change while it is gone.
	pods[0].Ready = false                                                   // loses readiness
	pods[1].IP = "10.0.9.9"                                                 // recreated elsewhere
	pods = append(pods, vllmPod("new", "10.0.0.99", label(KeyDpSize, "2"))) // appears
	left := members[1:]
	if n := pass(members[1], left); n != 2+2+2 {
		t.Errorf("the survivor wrote %d actions, want 6 (2 unregisters, 2 re-registers, 2 registers)", n)
	}
	if n := pass(members[1], left); n != 0 {
		t.Errorf("a second pass wrote %d actions, want none", n)
	}
	want, _ := Desired(testCfg, pods, nil)
	if len(f.regs) != len(want) {
		t.Fatalf("registry holds %d streams, want %d", len(f.regs), len(want))
	}
	for _, r := range want {
		if got := f.regs[r.Key]; !Same(got, r) {
			t.Errorf("%v: registered %+v, want %+v", r.Key, got, r)
		}
	}
}

func TestMineWithoutOwnerKeepsAll(t *testing.T) {
	as := []Action{{OpRegister, reg(1, 0, "a")}, {OpRegister, reg(2, 0, "b")}}
	if got := Mine(as, nil); len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	if got := Mine(as, func(id messages.WorkerID) bool { return id == 2 }); len(got) != 1 || got[0].Reg.Key.Worker != 2 {
		t.Fatalf("got %v", got)
	}
}
