package clusterindex

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/cluster/member"
)

// resolver finds the PID of each shard grain of one namespace: the owner
// member by rendezvous hashing (as disthash places grains), then an
// activation request to the owner's placement actor, bounded by the
// caller's deadline. PIDs are cached until the topology changes or a
// request to one fails. At most one lookup per shard is in flight. Safe
// for concurrent use.
//
// It reimplements disthash's client side (a dozen lines) because disthash
// swaps its member table without a lock and waits a fixed 5 s.
type resolver struct {
	m       *member.Member
	ids     []*cluster.ClusterIdentity
	timeout time.Duration // one activation request

	mu    sync.Mutex
	hash  uint64 // topology the cache belongs to
	rdv   *cluster.Rendezvous
	gen   uint64 // bumped whenever the cache is dropped
	pids  []*actor.PID
	waits []chan struct{} // closed when the shard's lookup in flight ends
}

func newResolver(m *member.Member, namespace string, shards int, timeout time.Duration) *resolver {
	r := &resolver{m: m, timeout: timeout, pids: make([]*actor.PID, shards), waits: make([]chan struct{}, shards)}
	for i := range shards {
		r.ids = append(r.ids, cluster.NewClusterIdentity(Identity(namespace, i), Kind))
	}
	return r
}

// syncLocked drops every cached PID when the topology changed.
func (r *resolver) syncLocked() {
	tp := r.m.Topology()
	if tp == nil || (r.rdv != nil && tp.TopologyHash == r.hash) {
		return
	}
	r.hash, r.rdv = tp.TopologyHash, cluster.NewRendezvous()
	r.rdv.UpdateMembers(tp.Members)
	clear(r.pids)
	r.gen++
}

// owner is the address of the member that places shard i ("" when no
// member hosts the kind).
func (r *resolver) owner(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncLocked()
	if r.rdv == nil {
		return ""
	}
	return r.rdv.GetByClusterIdentity(r.ids[i])
}

// cached returns shard i's PID if known.
func (r *resolver) cached(i int) *actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncLocked()
	return r.pids[i]
}

// lookup returns shard i's PID, or a channel closed when the lookup it
// started (or found in flight) ends.
func (r *resolver) lookup(i int) (*actor.PID, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncLocked()
	if p := r.pids[i]; p != nil {
		return p, nil
	}
	if r.waits[i] == nil {
		owner := ""
		if r.rdv != nil {
			owner = r.rdv.GetByClusterIdentity(r.ids[i])
		}
		r.waits[i] = make(chan struct{})
		go r.activate(i, owner, r.gen, r.waits[i])
	}
	return nil, r.waits[i]
}

func (r *resolver) activate(i int, owner string, gen uint64, done chan struct{}) {
	var pid *actor.PID
	if owner != "" {
		res, err := reply.FutureResult(r.m.Cluster.ActorSystem.Root.RequestFuture(actor.NewPID(owner, disthash.PartitionActivatorActorName),
			&cluster.ActivationRequest{ClusterIdentity: r.ids[i]}, r.timeout))
		if a, ok := res.(*cluster.ActivationResponse); err == nil && ok {
			pid = a.Pid
		}
	}
	r.mu.Lock()
	if gen == r.gen && pid != nil {
		r.pids[i] = pid
	}
	r.waits[i] = nil
	r.mu.Unlock()
	close(done)
}

// get returns shard i's PID, waiting for one lookup until deadline; nil
// when none is found in time.
func (r *resolver) get(i int, deadline time.Time) *actor.PID {
	pid, done := r.lookup(i)
	if pid != nil {
		return pid
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
		return r.cached(i)
	case <-t.C:
		return nil
	}
}

// forget drops shard i's PID if it is still pid (a request to it failed).
func (r *resolver) forget(i int, pid *actor.PID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pids[i] != nil && r.pids[i].Equal(pid) {
		r.pids[i] = nil
	}
}
