package clusterindex

import (
	"github.com/kvrouter/kvrouter/messages"
)

// fences is, per stream, the feed (listener) a shard follows. Several
// members may feed one stream for a moment — a hand-over, where the new
// owner starts its listener before the old owner has seen the new
// topology and stopped its own — so the shard follows only the newest:
//
//   - a batch of the followed feed is applied;
//   - a batch of a newer feed takes the stream over: the stream is
//     cleared first (the new listener rebuilds it from a resync and the
//     engine's replay buffer), then the batch is applied;
//   - a batch of an older feed (the previous owner's late batches) is
//     dropped and counted stale;
//   - after RemoveWorker the followed feed is closed: its late batches are
//     dropped too, until a newer feed (a listener started again) opens it.
//
// Feed 0 is "no feed" (a batch not stamped, e.g. a caller of Index
// without a listener): it is followed as any other. Plain data.
type fences map[messages.WorkerKey]fence

type fence struct {
	feed   uint64
	closed bool
}

// admit says whether a batch of stream k from feed is applied, and
// whether the stream must be cleared first (a newer feed took over).
func (fs fences) admit(k messages.WorkerKey, feed uint64) (apply, reset bool) {
	cur, known := fs[k]
	switch {
	case !known:
		fs[k] = fence{feed: feed}
		return true, false
	case feed > cur.feed:
		fs[k] = fence{feed: feed}
		return true, true
	case feed == cur.feed && !cur.closed:
		return true, false
	}
	return false, false
}

// close closes the followed feeds of every rank of w (a RemoveWorker).
func (fs fences) close(w messages.WorkerID) {
	for k, f := range fs {
		if k.Worker == w {
			if f.feed == 0 {
				delete(fs, k)
				continue
			}
			fs[k] = fence{feed: f.feed, closed: true}
		}
	}
}

// batchKey is the stream a coalesced batch belongs to (one per batch).
func batchKey(b *messages.RouterEventBatch) messages.WorkerKey {
	switch {
	case len(b.Clear) > 0:
		return b.Clear[0]
	case len(b.Events) > 0:
		return messages.WorkerKey{Worker: b.Events[0].WorkerID, DpRank: b.Events[0].Event.DpRank}
	}
	return messages.WorkerKey{Worker: b.Position.Stream.Worker, DpRank: b.Position.Stream.DpRank}
}

// feedClock hands out a member's feed ids: above every id it gave and at
// least the wall clock in nanoseconds, with the low 16 bits naming the
// member — so a listener started later, on any member, has a higher id
// (clocks in step to well under a topology change) and two members never
// hand out the same one.
type feedClock struct {
	last uint64
	tag  uint64
}

func (c *feedClock) next(nowNanos uint64) uint64 {
	id := nowNanos&^0xffff | c.tag
	if id <= c.last {
		id = (c.last+0x10000)&^0xffff | c.tag
	}
	c.last = id
	return id
}
