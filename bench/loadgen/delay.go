package loadgen

import (
	"container/heap"
	"fmt"
	"time"
)

// When a served request's KV events reach the routers that learn from them
// (bench/README.md, "Event delay"). An engine publishes BlockStored only
// once it has computed the blocks, at the end of the engine step that
// finished the prefill (vLLM sends one batch per step), so in the engine
// model a request's events are visible at its prefill end plus one publish
// interval — never earlier — while later requests keep arriving on the
// workload's clock. Policies that learn from events (kvrouter through its
// real ingest pipeline, Dynamo, llm-d's precise scorer, exact-greedy) see
// them then; the approximate ones (SGLang's tree, AIBrix, llm-d's
// approximate scorer) insert at route time and are unaffected.
const (
	// DelayPrefill: events land at prefill end + PublishInterval (the
	// default, the headline table).
	DelayPrefill = "prefill"
	// DelayNone: events land before the next request arrives — the old
	// zero-delay replay, kept as a labelled column.
	DelayNone = "none"
)

// DefaultPublishInterval is the model's publish interval: one engine step
// of a batch that also decodes (a few tens of milliseconds on a GPU).
const DefaultPublishInterval = 20 * time.Millisecond

// EventDelay is the event-delay model of one replay.
type EventDelay struct {
	Mode string // DelayPrefill or DelayNone
	// PublishInterval is added to the prefill end (DelayPrefill).
	PublishInterval time.Duration
}

// DefaultEventDelay is the headline model: prefill end + 20 ms.
func DefaultEventDelay() EventDelay {
	return EventDelay{Mode: DelayPrefill, PublishInterval: DefaultPublishInterval}
}

// Validate reports an unknown mode or a negative interval.
func (d EventDelay) Validate() error {
	if d.Mode != DelayPrefill && d.Mode != DelayNone {
		return fmt.Errorf("event delay %q: want %s or %s", d.Mode, DelayPrefill, DelayNone)
	}
	if d.PublishInterval < 0 {
		return fmt.Errorf("publish interval %v must not be negative", d.PublishInterval)
	}
	return nil
}

// Delayed reports whether events wait for the engine model (the zero
// value does not: the zero-delay replay).
func (d EventDelay) Delayed() bool { return d.Mode == DelayPrefill }

// Label names the model in reports: "prefill+20ms" or "none".
func (d EventDelay) Label() string {
	if !d.Delayed() {
		return DelayNone
	}
	return DelayPrefill + "+" + d.PublishInterval.String()
}

// publishAt is when the events of a request booked at arrival now, whose
// TTFT estimate is ttft seconds, become visible: -1 (at once) without delay.
func (d EventDelay) publishAt(now, ttft float64) float64 {
	if !d.Delayed() {
		return -1
	}
	return now + ttft + d.PublishInterval.Seconds()
}

// pending is one request's events waiting for their publish time.
type pending[T any] struct {
	at     float64 // model seconds
	seq    int     // booking order: ties keep it, so per-worker order holds
	worker int
	item   T
}

// publishQueue holds requests' events until the model's clock reaches
// their publish time. Within one worker, publish times never decrease with
// booking order (its prefills run first come first served), so releasing
// in (time, booking) order keeps every worker's event order.
type publishQueue[T any] struct {
	h   pendingHeap[T]
	seq int
}

// push files item of worker, to be released at model time at.
func (q *publishQueue[T]) push(at float64, worker int, item T) {
	heap.Push(&q.h, pending[T]{at: at, seq: q.seq, worker: worker, item: item})
	q.seq++
}

// release calls fn, in publish order, for every item due at or before now.
func (q *publishQueue[T]) release(now float64, fn func(worker int, item T) error) error {
	for q.h.Len() > 0 && q.h[0].at <= now {
		p := heap.Pop(&q.h).(pending[T])
		if err := fn(p.worker, p.item); err != nil {
			return err
		}
	}
	return nil
}

// Len is how many items wait.
func (q *publishQueue[T]) Len() int { return q.h.Len() }

type pendingHeap[T any] []pending[T]

func (h pendingHeap[T]) Len() int { return len(h) }
func (h pendingHeap[T]) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h pendingHeap[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap[T]) Push(x any)   { *h = append(*h, x.(pending[T])) }
func (h *pendingHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
