package registry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
)

// ActorName is the name of every member's registry replica actor.
const ActorName = "kvrouter-registry"

// Defaults for Config's zero values.
const (
	DefaultTimeout   = time.Second
	DefaultSyncEvery = 2 * time.Second
	// watchEvery is how often the replica looks for a new topology.
	watchEvery = 100 * time.Millisecond
)

// Config tunes a replica.
type Config struct {
	// Timeout bounds one request to another member's replica (a put's
	// acknowledgement, a sync).
	Timeout time.Duration
	// SyncEvery is the anti-entropy period: each period the replica
	// copies one random other member's table (and every member's when the
	// topology changes).
	SyncEvery time.Duration
}

// Replica is one member's copy of the registry. Its table is shared by
// the actor other members talk to and the local callers, under a mutex
// (it is configuration, read by the HTTP edge; no other actor reads it).
// Safe for concurrent use.
type Replica struct {
	cfg    Config
	system *actor.ActorSystem
	pid    *actor.PID
	member atomic.Pointer[member.Member]
	states atomic.Pointer[func() []StreamState]
	loads  atomic.Pointer[func() []RankLoad]
	keep   atomic.Pointer[func(id string, free bool) (bool, error)]
	delta  atomic.Pointer[func(member string, l RankLoad)]
	trip   atomic.Pointer[func(member, endpoint string)]
	pred   atomic.Pointer[func(p Prediction)]

	mu       sync.Mutex
	table    *Table
	rejected int

	changes chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// Start spawns the replica's actor (named ActorName) in system: call it
// before the member joins, so peers find it, then Join.
func Start(system *actor.ActorSystem, cfg Config) (*Replica, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = DefaultSyncEvery
	}
	r := &Replica{cfg: cfg, system: system, table: NewTable(), changes: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &replicaActor{r: r} }), ActorName)
	if err != nil {
		return nil, fmt.Errorf("registry replica: %w", err)
	}
	r.pid = pid
	return r, nil
}

// Join starts following m's topology: it first copies every member's
// table (bounded by the timeout), then keeps in step (see Config).
func (r *Replica) Join(m *member.Member) {
	r.member.Store(m)
	r.pull(r.Others())
	go r.watch()
}

// Stop ends the replica's background sync and stops its actor.
func (r *Replica) Stop() {
	if r.member.Load() != nil {
		close(r.stop)
		<-r.done
	}
	if r.system.IsStopped() {
		return
	}
	_ = r.system.Root.StopFuture(r.pid).Wait()
}

// Self is this member's address ("" before Join).
func (r *Replica) Self() string {
	if m := r.member.Load(); m != nil {
		return m.Address()
	}
	return ""
}

// Members lists the current members' addresses, sorted (nil before the
// first topology).
func (r *Replica) Members() []string {
	m := r.member.Load()
	if m == nil {
		return nil
	}
	tp := m.Topology()
	if tp == nil {
		return nil
	}
	out := make([]string, len(tp.Members))
	for i, x := range tp.Members {
		out[i] = x.Address()
	}
	slices.Sort(out)
	return out
}

// Owner is the member that follows stream k under the current topology.
func (r *Replica) Owner(k messages.WorkerKey) string { return Owner(r.Members(), k) }

// Changes is signalled (coalesced) whenever the table or the topology
// changes.
func (r *Replica) Changes() <-chan struct{} { return r.changes }

// Get returns the live entry of a key.
func (r *Replica) Get(k messages.WorkerKey) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Get(k)
}

// Live returns the live entries, sorted by key.
func (r *Replica) Live() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Live()
}

// Rejected counts peers' entries that did not convert.
func (r *Replica) Rejected() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rejected
}

// Put writes entries (registrations or tombstones) under new versions and
// sends them to every other member, waiting for their acknowledgements at
// most the timeout (a member that misses them copies them at its next
// sync). It returns the members that did not acknowledge.
func (r *Replica) Put(es ...Entry) (unacked []string) {
	r.mu.Lock()
	now := uint64(time.Now().UnixMicro())
	for i := range es {
		es[i] = r.table.Stamp(es[i], r.Self(), now)
	}
	r.table.Merge(es...)
	r.mu.Unlock()
	r.notify()
	msg := &clusterpb.RegistryPut{Entries: fromEntries(es)}
	others := r.Others()
	futures := make([]*actor.Future, len(others))
	for i, m := range others {
		futures[i] = r.system.Root.RequestFuture(actor.NewPID(m, ActorName), msg, r.cfg.Timeout)
	}
	for i, f := range futures {
		if _, err := reply.FutureResult(f); err != nil {
			unacked = append(unacked, others[i])
		}
	}
	return unacked
}

// ServeStates sets what this member answers when another asks for the
// state of the streams it follows.
func (r *Replica) ServeStates(f func() []StreamState) { r.states.Store(&f) }

// States asks member m for the state of the streams it follows.
func (r *Replica) States(m string, timeout time.Duration) ([]StreamState, error) {
	s, err := ask[*clusterpb.StreamStates](r, m, &clusterpb.StreamStatesRequest{}, "stream states", timeout)
	if err != nil {
		return nil, err
	}
	return toStates(s.States), nil
}

// ServeLoads sets what this member answers when another asks for the load
// it booked (the requests its route actors track).
func (r *Replica) ServeLoads(f func() []RankLoad) { r.loads.Store(&f) }

// Loads asks member m for the load it booked.
func (r *Replica) Loads(m string, timeout time.Duration) ([]RankLoad, error) {
	l, err := ask[*clusterpb.Loads](r, m, &clusterpb.LoadsRequest{}, "booked load", timeout)
	if err != nil {
		return nil, err
	}
	return toLoads(l.Loads), nil
}

// PushLoad sends load this member just booked (positive) or released
// (negative) to every other member (fire and forget: the next Loads
// snapshot corrects a lost one).
func (r *Replica) PushLoad(l RankLoad) {
	msg := &clusterpb.LoadDelta{Member: r.Self(), Load: fromLoads([]RankLoad{l})[0]}
	for _, m := range r.Others() {
		r.system.Root.Send(actor.NewPID(m, ActorName), msg)
	}
}

// ServeLoadDeltas sets what this member does with load another pushed
// (PushLoad). f runs on the replica's actor: it must not block.
func (r *Replica) ServeLoadDeltas(f func(member string, l RankLoad)) { r.delta.Store(&f) }

// Prediction is a prediction one member made on a worker it routed to
// (clusterpb.PredictionPush).
type Prediction struct {
	Member, Model, Tenant string
	Key                   messages.WorkerKey
	Hashes                []messages.LocalHash
	Carried               uint32
}

// MaxPushedHashes bounds the hashes one pushed prediction carries: a
// longer prompt's prediction covers its first MaxPushedHashes blocks.
const MaxPushedHashes = 16384

// PushPrediction sends a prediction this member just made to every other
// member (fire and forget: a lost one only means a sibling routed there
// may not see it).
func (r *Replica) PushPrediction(p Prediction) {
	others := r.Others()
	if len(others) == 0 {
		return
	}
	hs := p.Hashes[:min(len(p.Hashes), MaxPushedHashes)]
	raw := make([]uint64, len(hs))
	for i, h := range hs {
		raw[i] = uint64(h)
	}
	msg := &clusterpb.PredictionPush{Member: r.Self(), Model: p.Model, Tenant: p.Tenant, Key: clusterpb.FromKey(p.Key), Hashes: raw, Carried: p.Carried}
	for _, m := range others {
		r.system.Root.Send(actor.NewPID(m, ActorName), msg)
	}
}

// ServePredictions sets what this member does with a prediction another
// pushed (PushPrediction). f runs on the replica's actor: it must not
// block.
func (r *Replica) ServePredictions(f func(p Prediction)) { r.pred.Store(&f) }

// PushBreakerTrip tells every other member that this member's circuit
// breaker for endpoint opened (fire and forget: a member that misses it
// opens its own breaker when it sees the failures itself).
func (r *Replica) PushBreakerTrip(endpoint string) {
	msg := &clusterpb.BreakerTrip{Member: r.Self(), Endpoint: endpoint}
	for _, m := range r.Others() {
		r.system.Root.Send(actor.NewPID(m, ActorName), msg)
	}
}

// ServeBreakerTrips sets what this member does with a breaker trip
// another pushed (PushBreakerTrip). f runs on the replica's actor: it must
// not block.
func (r *Replica) ServeBreakerTrips(f func(member, endpoint string)) { r.trip.Store(&f) }

// ServeBookkeeping sets how this member applies a bookkeeping call
// (prefill_done, free) another member forwards: found false for a request
// none of its route actors tracks.
func (r *Replica) ServeBookkeeping(f func(id string, free bool) (found bool, err error)) {
	r.keep.Store(&f)
}

// Bookkeep asks member m to apply a bookkeeping call to request id, which
// m may have routed: found says whether m tracks it, err why m refused the
// change (or why m did not answer, found false).
func (r *Replica) Bookkeep(m, id string, free bool, timeout time.Duration) (found bool, err error) {
	a, err := ask[*clusterpb.BookkeepingAnswer](r, m, &clusterpb.BookkeepingRequest{RequestId: id, Free: free}, "bookkeeping", timeout)
	switch {
	case err != nil:
		return false, err
	case a.Error != "":
		return true, errors.New(a.Error)
	}
	return a.Found, nil
}

// ask sends msg to member m's replica and waits for its answer of type T.
func ask[T any](r *Replica, m string, msg any, what string, timeout time.Duration) (T, error) {
	var zero T
	res, err := reply.FutureResult(r.system.Root.RequestFuture(actor.NewPID(m, ActorName), msg, timeout))
	if err != nil {
		return zero, fmt.Errorf("%s from %s: %w", what, m, err)
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%s from %s: unexpected answer %T", what, m, res)
	}
	return v, nil
}

func (r *Replica) merge(ps []*clusterpb.RegistryEntry) {
	es, rejected := toEntries(ps)
	r.mu.Lock()
	r.rejected += rejected
	changed := r.table.Merge(es...)
	r.mu.Unlock()
	if changed {
		r.notify()
	}
}

func (r *Replica) notify() {
	select {
	case r.changes <- struct{}{}:
	default:
	}
}

// Others lists the current members but this one.
func (r *Replica) Others() []string {
	self := r.Self()
	return slices.DeleteFunc(r.Members(), func(m string) bool { return m == self })
}

// pull copies the tables of members, concurrently, each bounded by the
// timeout.
func (r *Replica) pull(members []string) {
	futures := make([]*actor.Future, len(members))
	for i, m := range members {
		futures[i] = r.system.Root.RequestFuture(actor.NewPID(m, ActorName), &clusterpb.RegistrySyncRequest{}, r.cfg.Timeout)
	}
	for _, f := range futures {
		if res, err := reply.FutureResult(f); err == nil {
			if s, ok := res.(*clusterpb.RegistrySync); ok {
				r.merge(s.Entries)
			}
		}
	}
}

// watch follows the topology (a change: notify, copy every member) and
// copies one random member every SyncEvery.
func (r *Replica) watch() {
	defer close(r.done)
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	var hash uint64
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		if r.system.IsStopped() { // the member left without Stop
			return
		}
		tp := r.member.Load().Topology()
		if tp != nil && tp.TopologyHash != hash {
			hash = tp.TopologyHash
			r.notify()
			r.pull(r.Others())
			last = time.Now()
			continue
		}
		if others := r.Others(); len(others) > 0 && time.Since(last) >= r.cfg.SyncEvery {
			r.pull([]string{others[rand.IntN(len(others))]})
			last = time.Now()
		}
	}
}

// replicaActor is the replica's face to the other members.
type replicaActor struct{ r *Replica }

func (a *replicaActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *clusterpb.RegistryPut:
		a.r.merge(m.Entries)
		ctx.Respond(&clusterpb.RegistryAck{})
	case *clusterpb.RegistrySyncRequest:
		a.r.mu.Lock()
		all := a.r.table.All()
		a.r.mu.Unlock()
		ctx.Respond(&clusterpb.RegistrySync{Entries: fromEntries(all)})
	case *clusterpb.StreamStatesRequest:
		self := a.r.Self()
		respondOff(ctx, func() any {
			if f := a.r.states.Load(); f != nil {
				return &clusterpb.StreamStates{Member: self, States: fromStates((*f)())}
			}
			return &clusterpb.StreamStates{Member: self}
		})
	case *clusterpb.BookkeepingRequest:
		respondOff(ctx, func() any {
			f := a.r.keep.Load()
			if f == nil {
				return &clusterpb.BookkeepingAnswer{}
			}
			found, err := (*f)(m.RequestId, m.Free)
			ans := &clusterpb.BookkeepingAnswer{Found: found}
			if found && err != nil { // not found with an error (a timeout): not known here
				ans.Error = err.Error()
			}
			return ans
		})
	case *clusterpb.LoadDelta:
		// Unlike a snapshot's sums, a delta is negative when load is
		// released.
		if f, l := a.r.delta.Load(), m.GetLoad(); f != nil && l.GetKey() != nil {
			(*f)(m.Member, RankLoad{Key: clusterpb.ToKey(l.Key), PrefillTokens: l.PrefillTokens, Blocks: l.Blocks, Requests: l.Requests})
		}
	case *clusterpb.PredictionPush:
		if f := a.r.pred.Load(); f != nil && m.Key != nil && len(m.Hashes) > 0 && len(m.Hashes) <= MaxPushedHashes {
			hs := make([]messages.LocalHash, len(m.Hashes))
			for i, h := range m.Hashes {
				hs[i] = messages.LocalHash(h)
			}
			(*f)(Prediction{Member: m.Member, Model: m.Model, Tenant: m.Tenant, Key: clusterpb.ToKey(m.Key), Hashes: hs, Carried: m.Carried})
		}
	case *clusterpb.BreakerTrip:
		if f := a.r.trip.Load(); f != nil && m.Endpoint != "" {
			(*f)(m.Member, m.Endpoint)
		}
	case *clusterpb.LoadsRequest:
		self := a.r.Self()
		respondOff(ctx, func() any {
			if f := a.r.loads.Load(); f != nil {
				return &clusterpb.Loads{Member: self, Loads: fromLoads((*f)())}
			}
			return &clusterpb.Loads{Member: self}
		})
	}
}

// respondOff answers the current request with what answer builds, on a
// goroutine of its own: the answers are read from the pipelines' and route
// actors with timeouts, which must not hold up this actor.
func respondOff(ctx actor.Context, answer func() any) {
	sender, root := ctx.Sender(), ctx.ActorSystem().Root
	go func() { root.Send(sender, answer()) }()
}
