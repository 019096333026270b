package indexer

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/mailbox"
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
}

// Spawn starts the shard actors and the front. Each applied batch is also
// forwarded, in order, to every follower (the router-event publisher, the
// session index); nil followers are skipped.
func Spawn(root *actor.RootContext, cfg Config, followers ...*actor.PID) *Index {
	n := max(cfg.Shards, 1)
	x := &Index{root: root, shards: make([]*actor.PID, n)}
	for i := range x.shards {
		x.shards[i] = root.Spawn(shardProps(i, n, cfg.Listeners))
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
// batches still queued in the front; Dump, Stats and Snapshot are.
func (x *Index) Query(q *QueryRequest, timeout time.Duration) (*QueryResult, error) {
	parts, err := gather[*QueryResult](x, q, false, timeout)
	if err != nil {
		return nil, err
	}
	return mergeQuery(parts), nil
}

// Dump returns replayable events rebuilding the index.
func (x *Index) Dump(timeout time.Duration) (*DumpResult, error) {
	parts, err := gather[*DumpResult](x, &DumpRequest{}, true, timeout)
	if err != nil {
		return nil, err
	}
	return mergeDumps(parts), nil
}

// Stats returns the counters and sizes over all shards.
func (x *Index) Stats(timeout time.Duration) (*Stats, error) {
	parts, err := gather[*Stats](x, &StatsRequest{}, true, timeout)
	if err != nil {
		return nil, err
	}
	return mergeStats(parts), nil
}

// Snapshot returns every stream's blocks.
func (x *Index) Snapshot(timeout time.Duration) (*Snapshot, error) {
	parts, err := gather[*Snapshot](x, &SnapshotRequest{}, true, timeout)
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
}

// gather sends msg to every shard at once — through the front when
// ordered, so each shard answers after the batches sent before — and waits
// for all the answers, each within timeout of the send.
func gather[T any](x *Index, msg any, ordered bool, timeout time.Duration) ([]T, error) {
	futures := make([]*actor.Future, len(x.shards))
	for i, pid := range x.shards {
		if ordered {
			futures[i] = x.root.RequestFuture(x.front, &viaFront{shard: i, msg: msg}, timeout)
		} else {
			futures[i] = x.root.RequestFuture(pid, msg, timeout)
		}
	}
	out := make([]T, len(futures))
	for i, f := range futures {
		res, err := f.Result()
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
