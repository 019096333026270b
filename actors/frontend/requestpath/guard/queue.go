package guard

import (
	"cmp"
	"slices"
	"time"
)

// QueueItem is one request waiting in a Queue: its priority band (higher
// dispatches first), its fairness flow (round-robin within the band), its
// size and its deadline.
type QueueItem struct {
	ID       uint64
	Band     int
	Flow     string
	Bytes    int64
	Deadline time.Time
}

// Queue is the flow-control queue: bounded in requests and bytes, popped
// by band (highest first) and, within a band, round-robin over the flows,
// oldest first within a flow. When a push does not fit, the newest items
// of bands below the pushed one are evicted, lowest band first; when that
// is not enough the push is refused and nothing is evicted. A plain
// value: the caller holds the lock.
type Queue struct {
	MaxRequests int
	MaxBytes    int64

	items map[uint64]*queued
	bands []*queueBand // by Band, highest first
	bytes int64
	seq   uint64
}

type queued struct {
	it  QueueItem
	seq uint64 // push order: the newest has the highest
}

type queueBand struct {
	band  int
	flows map[string][]uint64 // each flow's ids, oldest first
	ring  []string            // the flows with items, in round-robin order
	next  int                 // the ring position served next
}

// NewQueue returns an empty queue with its bounds.
func NewQueue(maxRequests int, maxBytes int64) Queue {
	return Queue{MaxRequests: maxRequests, MaxBytes: maxBytes, items: map[uint64]*queued{}}
}

// Len is the number of items queued.
func (q *Queue) Len() int { return len(q.items) }

// Bytes is the size of the items queued.
func (q *Queue) Bytes() int64 { return q.bytes }

// BandLen is the number of items queued in band b.
func (q *Queue) BandLen(b int) int {
	n := 0
	for _, e := range q.items {
		if e.it.Band == b {
			n++
		}
	}
	return n
}

// LenFrom is the number of items queued in band b or a higher one: the
// requests a new request of band b would wait behind.
func (q *Queue) LenFrom(b int) int {
	n := 0
	for _, qb := range q.bands { // highest first
		if qb.band < b {
			break
		}
		for _, ids := range qb.flows {
			n += len(ids)
		}
	}
	return n
}

// Push queues it at the back of its flow; evicted are the items it
// displaced (their waiters must be answered). ok is false when it does
// not fit even after evicting every lower band (nothing is evicted then).
func (q *Queue) Push(it QueueItem) (evicted []QueueItem, ok bool) {
	return q.push(it, false)
}

// Requeue puts back an item popped a moment ago (the fleet had no room
// after all) at the front of its flow, to be served next in its band.
func (q *Queue) Requeue(it QueueItem) bool {
	_, ok := q.push(it, true)
	return ok
}

func (q *Queue) push(it QueueItem, front bool) ([]QueueItem, bool) {
	if _, dup := q.items[it.ID]; dup || it.Bytes > q.MaxBytes || q.MaxRequests <= 0 {
		return nil, false
	}
	victims := q.victims(it)
	if victims == nil && (len(q.items)+1 > q.MaxRequests || q.bytes+it.Bytes > q.MaxBytes) {
		return nil, false
	}
	var evicted []QueueItem
	for _, id := range victims {
		evicted = append(evicted, q.items[id].it)
		q.Remove(id)
	}
	q.seq++
	q.items[it.ID] = &queued{it: it, seq: q.seq}
	q.bytes += it.Bytes
	b := q.band(it.Band)
	ids, had := b.flows[it.Flow]
	if front {
		b.flows[it.Flow] = append([]uint64{it.ID}, ids...)
	} else {
		b.flows[it.Flow] = append(ids, it.ID)
	}
	switch {
	case !had:
		// A new flow joins the ring just before the one served next, so
		// it waits a full round like the others; requeued, it is next.
		b.ring = slices.Insert(b.ring, b.next, it.Flow)
		if !front {
			b.next++
		}
	case front:
		b.next = slices.Index(b.ring, it.Flow)
	}
	if b.next >= len(b.ring) {
		b.next = 0
	}
	return evicted, true
}

// victims lists the ids to evict for it to fit: the newest of the lowest
// band first, only bands below it's. Nil when it fits already or cannot.
func (q *Queue) victims(it QueueItem) []uint64 {
	n, bytes := len(q.items)+1, q.bytes+it.Bytes
	if n <= q.MaxRequests && bytes <= q.MaxBytes {
		return nil
	}
	var out []uint64
	for i := len(q.bands) - 1; i >= 0 && q.bands[i].band < it.Band; i-- {
		var ids []uint64
		for _, f := range q.bands[i].flows {
			ids = append(ids, f...)
		}
		slices.SortFunc(ids, func(a, b uint64) int { return cmp.Compare(q.items[b].seq, q.items[a].seq) })
		for _, id := range ids {
			out = append(out, id)
			n, bytes = n-1, bytes-q.items[id].it.Bytes
			if n <= q.MaxRequests && bytes <= q.MaxBytes {
				return out
			}
		}
	}
	return nil
}

func (q *Queue) band(b int) *queueBand {
	i, found := slices.BinarySearchFunc(q.bands, b, func(x *queueBand, b int) int { return b - x.band })
	if !found {
		q.bands = slices.Insert(q.bands, i, &queueBand{band: b, flows: map[string][]uint64{}})
	}
	return q.bands[i]
}

// Pop takes the next item: the highest band's, round-robin over its
// flows.
func (q *Queue) Pop() (QueueItem, bool) {
	for _, b := range q.bands {
		if len(b.ring) == 0 {
			continue
		}
		id := b.flows[b.ring[b.next]][0]
		it := q.items[id].it
		b.next++ // Remove keeps next on the flow after this one
		q.Remove(id)
		return it, true
	}
	return QueueItem{}, false
}

// Remove takes id out of the queue (its client went away, it expired);
// false when it is not queued.
func (q *Queue) Remove(id uint64) bool {
	e, ok := q.items[id]
	if !ok {
		return false
	}
	delete(q.items, id)
	q.bytes -= e.it.Bytes
	b := q.band(e.it.Band)
	ids := b.flows[e.it.Flow]
	ids = slices.Delete(ids, slices.Index(ids, id), slices.Index(ids, id)+1)
	if len(ids) > 0 {
		b.flows[e.it.Flow] = ids
	} else {
		delete(b.flows, e.it.Flow)
		i := slices.Index(b.ring, e.it.Flow)
		b.ring = slices.Delete(b.ring, i, i+1)
		if i < b.next {
			b.next--
		}
	}
	if b.next >= len(b.ring) {
		b.next = 0
	}
	return true
}

// Expired removes and returns the items whose deadline is not after now,
// oldest first.
func (q *Queue) Expired(now time.Time) []QueueItem {
	var out []QueueItem
	for _, e := range q.items {
		if !e.it.Deadline.After(now) {
			out = append(out, e.it)
		}
	}
	slices.SortFunc(out, func(a, b QueueItem) int { return cmp.Compare(q.items[a.ID].seq, q.items[b.ID].seq) })
	for _, it := range out {
		q.Remove(it.ID)
	}
	return out
}
