package clusterindex

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
)

// AgentName is the name of every member's rebuild agent, which shard
// grains ask for the streams the member's listeners feed them.
const AgentName = "kvrouter-rebuild"

// DefaultNamespace names the grains of a pipeline started without a
// namespace (pipeline.Config.Namespace "").
const DefaultNamespace = "default"

// Node is one process's part of the cluster index: the shard kind it
// hosts, its rebuild agent, and the indexes of its pipelines (with their
// listeners, which the agent asks to rebuild a lost slice). One per
// member.
type Node struct {
	cfg      Config
	member   atomic.Pointer[member.Member]
	registry atomic.Pointer[registry.Replica]

	mu   sync.Mutex
	regs []*registration
	// hosted is, per shard identity, the activation this member hosts
	// (once it holds a slice: see grain.decide).
	hosted map[string]uint64
}

// registration is one pipeline's index on this member.
type registration struct {
	namespace string
	index     *Index
	listeners func() map[messages.StreamID]*actor.PID
}

// feed is one local listener feeding a shard.
type feed struct {
	index  *Index
	stream messages.StreamID
	pid    *actor.PID
}

// NewNode returns a node whose indexes are sized by cfg (Shards must be
// the same on every member).
func NewNode(cfg Config) *Node { return &Node{cfg: cfg.withDefaults(), hosted: map[string]uint64{}} }

// Kind is the shard kind this node's member hosts.
func (n *Node) Kind() *cluster.Kind {
	return cluster.NewKind(Kind, actor.PropsFromProducer(func() actor.Actor { return &grain{node: n} },
		actor.WithReceiverMiddleware(poisonAsMoved)))
}

// Join starts the rebuild agent and the worker registry's replica in
// system and joins the cluster cfg describes, hosting this node's shard
// kind besides cfg.Kinds; the replica then copies the other members'
// registry.
func (n *Node) Join(system *actor.ActorSystem, cfg member.Config) (*member.Member, error) {
	agent, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newAgent(n) }), AgentName)
	if err != nil {
		return nil, err
	}
	reg, err := registry.Start(system, registry.Config{})
	if err != nil {
		_ = system.Root.StopFuture(agent).Wait()
		return nil, err
	}
	cfg.Kinds = append(slices.Clone(cfg.Kinds), n.Kind())
	m, err := member.Start(system, cfg)
	if err != nil {
		reg.Stop()
		_ = system.Root.StopFuture(agent).Wait()
		return nil, err
	}
	n.member.Store(m)
	reg.Join(m)
	n.registry.Store(reg)
	return m, nil
}

// Registry is this member's replica of the cluster's worker registry (nil
// before Join).
func (n *Node) Registry() *registry.Replica { return n.registry.Load() }

// Leave stops the registry replica and leaves the cluster gracefully.
func (n *Node) Leave() {
	if r := n.registry.Load(); r != nil {
		r.Stop()
	}
	if m := n.member.Load(); m != nil {
		m.Shutdown()
	}
}

// Member is the joined member (nil before Join).
func (n *Node) Member() *member.Member { return n.member.Load() }

// errNotJoined: NewIndex before Join.
var errNotJoined = errors.New("clusterindex: Node.NewIndex before Node.Join")

// NewIndex is a pipeline.Config.NewIndex: the namespace's cluster index
// on this member (call after Join), with env's followers fed every batch
// and env's listeners offered to rebuild lost slices.
func (n *Node) NewIndex(env pipeline.IndexEnv) pipeline.Index {
	m := n.member.Load()
	if m == nil {
		panic(errNotJoined)
	}
	ns := env.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	reg := &registration{namespace: ns, index: Spawn(m, ns, n.cfg, env.Followers...), listeners: env.Listeners}
	n.mu.Lock()
	n.regs = append(n.regs, reg)
	n.mu.Unlock()
	return &PipelineIndex{index: reg.index, node: n, reg: reg}
}

func (n *Node) unregister(reg *registration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.regs = slices.DeleteFunc(n.regs, func(r *registration) bool { return r == reg })
}

// members lists the addresses of the members of the latest topology (nil
// before the first).
func (n *Node) members() []string {
	m := n.member.Load()
	if m == nil {
		return nil
	}
	tp := m.Topology()
	if tp == nil {
		return nil
	}
	return addresses(tp.Members)
}

// address is this member's address ("" before Join).
func (n *Node) address() string {
	if m := n.member.Load(); m != nil {
		return m.Address()
	}
	return ""
}

// feeds lists the local listeners whose streams a namespace's shard holds.
func (n *Node) feeds(namespace string, shard int) []feed {
	n.mu.Lock()
	regs := slices.Clone(n.regs)
	n.mu.Unlock()
	var out []feed
	for _, r := range regs {
		if r.namespace != namespace || r.listeners == nil {
			continue
		}
		for s, pid := range r.listeners() {
			if indexer.ShardOf(s.Worker, r.index.Shards()) == shard {
				out = append(out, feed{index: r.index, stream: s, pid: pid})
			}
		}
	}
	return out
}

// host records that activation holds ci's slice on this member.
func (n *Node) host(ci *cluster.ClusterIdentity, activation uint64) {
	if ci == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hosted[ci.Identity] = activation
}

// unhost forgets activation (stopped or handed over).
func (n *Node) unhost(ci *cluster.ClusterIdentity, activation uint64) {
	if ci == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hosted[ci.Identity] == activation {
		delete(n.hosted, ci.Identity)
	}
}

// hosting reports whether this member hosts an activation of identity
// other than activation (one that activation is taking over from).
func (n *Node) hosting(identity string, activation uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	a, ok := n.hosted[identity]
	return ok && a != activation
}

// placement is the member that places ci under this member's latest
// topology, and whether this member is in it.
func (n *Node) placement(ci *cluster.ClusterIdentity) (owner string, member bool) {
	m := n.member.Load()
	if m == nil || ci == nil {
		return "", false
	}
	tp := m.Topology()
	if tp == nil {
		return "", false
	}
	rdv := cluster.NewRendezvous()
	rdv.UpdateMembers(tp.Members)
	return rdv.GetByClusterIdentity(ci), slices.Contains(addresses(tp.Members), m.Address())
}
