package clusterindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/cluster/clusterpb"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// Defaults for Config's zero values.
const (
	DefaultShards        = 8
	DefaultQueryDeadline = 5 * time.Millisecond
	DefaultLookupTimeout = time.Second
	DefaultMaxPending    = 4096
	DefaultHandoverWait  = 2 * time.Second
	DefaultLinger        = 2 * time.Second
	DefaultGapWait       = time.Second
)

// Config sizes a namespace's cluster index. Shards must be the same on
// every member: it decides which shard holds a worker.
type Config struct {
	// Shards is the number of shard grains (default 8); fixed for the
	// namespace's life — hosts joining move grains, not workers.
	Shards int
	// QueryDeadline bounds Query when it is given 0 (default 5 ms).
	QueryDeadline time.Duration
	// LookupTimeout bounds one activation request to a shard's owner.
	LookupTimeout time.Duration
	// MaxPending bounds the messages the front holds per shard while its
	// grain is being looked up, and those a new shard activation holds
	// while it waits for its hand-over.
	MaxPending int
	// HandoverWait bounds how long a new shard activation waits for the
	// hand-over of the activation it replaces before rebuilding instead
	// (default 2 s; see handover.go).
	HandoverWait time.Duration
	// Linger is how long an activation that handed its slice over keeps
	// forwarding what still reaches it (members that have not seen the
	// new topology yet) before it stops (default 2 s).
	Linger time.Duration
	// GapWait bounds how long a shard holds a front's messages behind a
	// missing one before it gives up on it and rebuilds (default 1 s).
	GapWait time.Duration
}

// Index is one member's handle on a namespace's cluster index. Its
// methods may be called from many goroutines.
type Index struct {
	root     *actor.RootContext
	res      *resolver
	front    *actor.PID
	deadline time.Duration
	dropped  atomic.Uint64
}

// Spawn starts the member's front actor for namespace. The shard grains
// are activated on their owners by the first message that reaches them.
// Each batch is also forwarded, in order, to every follower (the session
// index, the router-event publisher; nil ones skipped).
func Spawn(m *member.Member, namespace string, cfg Config, followers ...*actor.PID) *Index {
	cfg = cfg.withDefaults()
	n := cfg.Shards
	x := &Index{root: m.Cluster.ActorSystem.Root, res: newResolver(m, namespace, n, cfg.LookupTimeout),
		deadline: cfg.QueryDeadline}
	front := &frontActor{res: x.res, pending: make([][]outgoing, n), waiting: make([]bool, n),
		maxPending: cfg.MaxPending, retry: 100 * time.Millisecond, dropped: &x.dropped,
		feeds: map[messages.WorkerKey]uint64{}, clock: feedClock{tag: xxh3.HashString(m.Address()) & 0xffff},
		id: rand.Uint64() | 1, seqs: make([]uint64, n)}
	for _, f := range followers {
		if f != nil {
			front.followers = append(front.followers, f)
		}
	}
	x.front = x.root.Spawn(actor.PropsFromProducer(func() actor.Actor { return front }))
	return x
}

// withDefaults gives every field left zero (or negative) its default, in
// one place: the node and the index read their fields as they are.
func (c Config) withDefaults() Config {
	orDefault := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.Shards <= 0 {
		c.Shards = DefaultShards
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	orDefault(&c.QueryDeadline, DefaultQueryDeadline)
	orDefault(&c.LookupTimeout, DefaultLookupTimeout)
	orDefault(&c.HandoverWait, DefaultHandoverWait)
	orDefault(&c.Linger, DefaultLinger)
	orDefault(&c.GapWait, DefaultGapWait)
	return c
}

// PID is where this member's RouterEventBatches go.
func (x *Index) PID() *actor.PID { return x.front }

// Shards is the number of shard grains.
func (x *Index) Shards() int { return len(x.res.ids) }

// Owner is the address of the member placing shard under the current
// topology ("" when no member hosts shards).
func (x *Index) Owner(shard int) string { return x.res.owner(shard) }

// Dropped counts messages the front dropped because a shard's lookup
// backlog was full.
func (x *Index) Dropped() uint64 { return x.dropped.Load() }

// RemoveWorker drops every rank of a worker, after the batches this
// member sent before.
func (x *Index) RemoveWorker(w messages.WorkerID) {
	x.root.Send(x.front, &indexer.RemoveWorker{Worker: w})
}

// StartFeed announces that this member starts a listener for stream s:
// the batches it produces carry a feed id newer than any listener's
// before, so the shard follows them and drops another member's late ones
// (see fences). Call it before starting the listener.
func (x *Index) StartFeed(s messages.StreamID) { x.root.Send(x.front, &startFeed{stream: s}) }

// Stop stops the member's front (the grains live on).
func (x *Index) Stop() { _ = x.root.StopFuture(x.front).Wait() }

// Answer is a query's answer from the shards that answered in time.
type Answer struct {
	indexer.QueryResult
	// Missing lists the shards that did not answer within the deadline:
	// their workers are absent from Scores.
	Missing []int
	// Recovering lists the shards whose slice is rebuilding: their
	// workers' scores may be low (blocks missing), never high.
	Recovering []int
	// Rejected counts shard answers that did not convert (listed Missing).
	Rejected int
}

// Partial reports whether some workers' scores are absent or may be low.
func (a *Answer) Partial() bool { return len(a.Missing) > 0 || len(a.Recovering) > 0 }

// Query asks every shard grain at once and merges the answers that arrive
// within deadline (0: Config.QueryDeadline). It never waits longer: a
// shard whose owner is gone, busy or still being looked up is listed
// Missing.
func (x *Index) Query(q *indexer.QueryRequest, deadline time.Duration) *Answer {
	if deadline <= 0 {
		deadline = x.deadline
	}
	until := time.Now().Add(deadline)
	pq := clusterpb.FromQuery(q)
	type part struct {
		shard int
		res   *clusterpb.QueryResult
	}
	n := x.Shards()
	ch := make(chan part, n)
	for i := range n {
		go func() { ch <- part{i, x.ask(i, pq, until)} }()
	}
	ans := &Answer{}
	parts := make([]*indexer.QueryResult, 0, n)
	for range n {
		p := <-ch
		if p.res == nil {
			ans.Missing = append(ans.Missing, p.shard)
			continue
		}
		r, err := clusterpb.ToQueryResult(p.res)
		if err != nil {
			ans.Rejected++
			ans.Missing = append(ans.Missing, p.shard)
			continue
		}
		if p.res.GetStatus().GetRecovering() {
			ans.Recovering = append(ans.Recovering, p.shard)
		}
		parts = append(parts, r)
	}
	slices.Sort(ans.Missing)
	slices.Sort(ans.Recovering)
	ans.QueryResult = *indexer.MergeQuery(parts)
	return ans
}

// ask sends the query to shard i and waits until the deadline; nil when
// it gets no answer (a failed request forgets the shard's PID).
func (x *Index) ask(i int, q *clusterpb.QueryRequest, until time.Time) *clusterpb.QueryResult {
	pid := x.res.get(i, until)
	if pid == nil {
		return nil
	}
	left := time.Until(until)
	if left <= 0 {
		return nil
	}
	res, err := reply.FutureResult(x.root.RequestFuture(pid, q, left))
	if err != nil {
		x.res.forget(i, pid)
		return nil
	}
	r, _ := res.(*clusterpb.QueryResult)
	return r
}

// Stats returns the counters and sizes over all shards, ordered after the
// batches this member sent before; an error if a shard does not answer.
func (x *Index) Stats(timeout time.Duration) (*indexer.Stats, error) {
	parts, err := gather(x, &clusterpb.StatsRequest{}, timeout, clusterpb.ToStats)
	if err != nil {
		return nil, err
	}
	return indexer.MergeStats(parts), nil
}

// Snapshot returns every stream's blocks, ordered like Stats.
func (x *Index) Snapshot(timeout time.Duration) (*indexer.Snapshot, error) {
	parts, err := gather(x, &clusterpb.SnapshotRequest{}, timeout, clusterpb.ToSnapshot)
	if err != nil {
		return nil, err
	}
	return indexer.MergeSnapshots(parts), nil
}

// Dump returns replayable events rebuilding the index, ordered like Stats.
func (x *Index) Dump(timeout time.Duration) (*indexer.DumpResult, error) {
	parts, err := gather(x, &clusterpb.DumpRequest{}, timeout, clusterpb.ToDump)
	if err != nil {
		return nil, err
	}
	return indexer.MergeDumps(parts), nil
}

// Seed rebuilds part of shard's slice (see clusterpb.Seed): the streams in
// clear are reset, events (a dump of them) applied; complete marks the
// slice whole. Ordered after the batches this member sent before.
func (x *Index) Seed(shard int, clear []messages.WorkerKey, events []messages.RouterEvent, complete bool, timeout time.Duration) (*clusterpb.ShardStatus, error) {
	b := clusterpb.FromBatch(&messages.RouterEventBatch{Clear: clear, Events: events})
	seed := &clusterpb.Seed{Clear: b.Clear, Events: b.Events, Complete: complete}
	res, err := reply.FutureResult(x.root.RequestFuture(x.front, &viaFront{shard: shard, msg: seed}, timeout))
	if err != nil {
		return nil, fmt.Errorf("seed shard %d: %w", shard, err)
	}
	st, ok := res.(*clusterpb.ShardStatus)
	if !ok {
		return nil, fmt.Errorf("seed shard %d: unexpected answer %T", shard, res)
	}
	return st, nil
}

// Create declares the namespace new — every slice is whole (empty) — so
// no shard reports recovering. Call it once, when the namespace is first
// created in the cluster, never after a host loss: that would hide slices
// still to be rebuilt.
func (x *Index) Create(timeout time.Duration) error {
	for i := range x.Shards() {
		if _, err := x.Seed(i, nil, nil, true, timeout); err != nil {
			return err
		}
	}
	return nil
}

// gather asks every shard, through the front, and converts the answers.
func gather[P any, T any](x *Index, msg any, timeout time.Duration, conv func(P) (T, error)) ([]T, error) {
	futures := make([]*actor.Future, x.Shards())
	for i := range futures {
		futures[i] = x.root.RequestFuture(x.front, &viaFront{shard: i, msg: msg}, timeout)
	}
	out := make([]T, len(futures))
	for i, f := range futures {
		res, err := reply.FutureResult(f)
		if err != nil {
			return nil, fmt.Errorf("shard grain %d: %w", i, err)
		}
		p, ok := res.(P)
		if !ok {
			return nil, fmt.Errorf("shard grain %d: unexpected answer %T", i, res)
		}
		if out[i], err = conv(p); err != nil {
			return nil, fmt.Errorf("shard grain %d: %w", i, err)
		}
	}
	return out, nil
}
