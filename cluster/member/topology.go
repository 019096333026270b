package member

import (
	"sync"

	"github.com/asynkron/protoactor-go/cluster"
)

// topology keeps the latest ClusterTopology the member published. It is
// subscribed before the member starts, so it never misses one, and it is
// read under its own lock: protoactor's identity lookup swaps its member
// table without one, so kvrouter places grains from this copy instead.
type topology struct {
	mu     sync.Mutex
	latest *cluster.ClusterTopology
}

func (t *topology) set(ev any) {
	if tp, ok := ev.(*cluster.ClusterTopology); ok {
		t.mu.Lock()
		t.latest = tp
		t.mu.Unlock()
	}
}

// Topology returns the latest cluster topology (nil before the first);
// the value is never modified, a new one replaces it on every change.
func (m *Member) Topology() *cluster.ClusterTopology {
	m.topo.mu.Lock()
	defer m.topo.mu.Unlock()
	return m.topo.latest
}
