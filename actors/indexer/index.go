package indexer

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/messages"
)

// Config sizes a namespace's index.
type Config struct {
	// Shards is the number of shard actors (default 1).
	Shards int
	// Listeners, when set, returns the pipeline's listeners by stream: a
	// shard actor restarted after a crash has lost its slice, and asks the
	// listeners of the streams placed on it to rebuild them from the
	// engines' replay buffers (listener.Rebuild).
	Listeners func() map[messages.StreamID]*actor.PID
}

// Index is a running sharded index: the front actor the coalescers send
// to and the shard actors behind it. Its methods may be called from many
// goroutines.
type Index struct {
	root   *actor.RootContext
	front  *actor.PID
	shards []*actor.PID
	// workers is the shards' dispatcher: a lookup on an idle shard runs on
	// a parked goroutine whose stack has grown to the tree walk's depth
	// (mailbox.Dispatcher). A mailbox has at most one turn at a time, so
	// no more goroutines than shards stay parked; Stop ends them.
	workers *mailbox.Dispatcher
}

// Spawn starts the shard actors and the front. Each applied batch is also
// forwarded, in order, to every follower (the router-event publisher, the
// session index); nil followers are skipped.
func Spawn(root *actor.RootContext, cfg Config, followers ...*actor.PID) *Index {
	n := max(cfg.Shards, 1)
	x := &Index{root: root, shards: make([]*actor.PID, n), workers: mailbox.NewDispatcher(shardThroughput, n)}
	for i := range x.shards {
		x.shards[i] = root.Spawn(shardProps(i, n, cfg.Listeners, x.workers))
	}
	front := &frontActor{shards: x.shards}
	for _, f := range followers {
		if f != nil {
			front.followers = append(front.followers, f)
		}
	}
	x.front = root.Spawn(actor.PropsFromProducer(func() actor.Actor { return front }, mailbox.Counted(mailbox.Index)))
	return x
}

// PID is where RouterEventBatches go (the coalescer hub's next hop).
func (x *Index) PID() *actor.PID { return x.front }

// Shards is the number of shard actors.
func (x *Index) Shards() int { return len(x.shards) }

// Query asks every shard, concurrently, and merges their answers. It goes
// straight to the shards (the route hot path), so it is not ordered after
// batches still queued in the front; Dump, Stats and Snapshot are. The
// shards answer into one channel the request carries (package reply), not
// through futures: one message and one goroutine hand-off per shard, one
// timer per query. The query's deadline is the sooner of q.Deadline and
// timeout from now: a shard that takes it later skips the lookup and
// answers expiry.ErrExpired, which Query returns at once.
func (x *Index) Query(q *QueryRequest, timeout time.Duration) (*QueryResult, error) {
	m := *q
	m.reply = reply.Make[shardAnswer](len(x.shards))
	if due := time.Now().Add(timeout); m.Deadline.IsZero() || due.Before(m.Deadline) {
		m.Deadline = due
	}
	for _, pid := range x.shards {
		x.root.Send(pid, &m)
	}
	parts := make([]*QueryResult, len(x.shards))
	var d reply.Deadline
	defer d.Stop()
	for range x.shards {
		a, err := m.reply.Until(&d, timeout)
		if err != nil {
			return nil, fmt.Errorf("index shards %v: %w", silent(parts), err)
		}
		if a.err != nil {
			return nil, fmt.Errorf("index shard %d: %w", a.shard, a.err)
		}
		parts[a.shard] = a.res
	}
	return mergeQuery(parts), nil
}

// silent lists the shards whose part is missing.
func silent(parts []*QueryResult) []int {
	var out []int
	for i, p := range parts {
		if p == nil {
			out = append(out, i)
		}
	}
	return out
}

// Dump returns replayable events rebuilding the index.
func (x *Index) Dump(timeout time.Duration) (*DumpResult, error) {
	parts, err := gather[*DumpResult](x, &DumpRequest{}, timeout)
	if err != nil {
		return nil, err
	}
	return mergeDumps(parts), nil
}

// Stats returns the counters and sizes over all shards.
func (x *Index) Stats(timeout time.Duration) (*Stats, error) {
	parts, err := gather[*Stats](x, &StatsRequest{}, timeout)
	if err != nil {
		return nil, err
	}
	return mergeStats(parts), nil
}

// Snapshot returns every stream's blocks.
func (x *Index) Snapshot(timeout time.Duration) (*Snapshot, error) {
	parts, err := gather[*Snapshot](x, &SnapshotRequest{}, timeout)
	if err != nil {
		return nil, err
	}
	return mergeSnapshots(parts), nil
}

// RemoveWorker drops every rank of a worker, after the batches already
// sent to the front.
func (x *Index) RemoveWorker(w messages.WorkerID) {
	x.root.Send(x.front, &RemoveWorker{Worker: w})
}

// Stop stops the front, then the shards.
func (x *Index) Stop() {
	_ = x.root.StopFuture(x.front).Wait()
	for _, pid := range x.shards {
		_ = x.root.StopFuture(pid).Wait()
	}
	x.workers.Stop()
}

// gather sends msg to every shard at once through the front, so each
// shard answers after the batches sent before, and waits for all the
// answers, each within timeout of the send.
func gather[T any](x *Index, msg any, timeout time.Duration) ([]T, error) {
	futures := make([]*actor.Future, len(x.shards))
	for i := range x.shards {
		futures[i] = x.root.RequestFuture(x.front, &viaFront{shard: i, msg: msg}, timeout)
	}
	out := make([]T, len(futures))
	for i, f := range futures {
		res, err := reply.FutureResult(f)
		if err != nil {
			return nil, fmt.Errorf("index shard %d: %w", i, err)
		}
		v, ok := res.(T)
		if !ok {
			return nil, fmt.Errorf("index shard %d: unexpected answer %T", i, res)
		}
		out[i] = v
	}
	return out, nil
}
