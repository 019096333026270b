package guard

import (
	"fmt"
	"testing"
	"time"
)

func popAll(q *Queue) string {
	s := ""
	for {
		it, ok := q.Pop()
		if !ok {
			return s
		}
		s += fmt.Sprintf("%d ", it.ID)
	}
}

func push(t *testing.T, q *Queue, id uint64, band int, flow string) []QueueItem {
	t.Helper()
	ev, ok := q.Push(QueueItem{ID: id, Band: band, Flow: flow, Bytes: 10, Deadline: t0.Add(time.Duration(id) * time.Second)})
	if !ok {
		t.Fatalf("push %d refused", id)
	}
	return ev
}

// The higher band goes first; within a band the flows alternate, each
// oldest first, so a flow with many items does not starve the others.
func TestQueueBandsAndFairness(t *testing.T) {
	q := NewQueue(100, 1<<20)
	for id := uint64(1); id <= 4; id++ {
		push(t, &q, id, 0, "a") // tenant a floods the default band
	}
	push(t, &q, 5, 0, "b")
	push(t, &q, 6, 0, "c")
	push(t, &q, 7, 10, "x") // critical
	push(t, &q, 8, 0, "b")
	if q.LenFrom(10) != 1 || q.LenFrom(0) != 8 || q.LenFrom(11) != 0 || q.LenFrom(-1) != 8 {
		t.Fatalf("LenFrom 10, 0, 11, -1: %d %d %d %d; want 1 8 0 8", q.LenFrom(10), q.LenFrom(0), q.LenFrom(11), q.LenFrom(-1))
	}
	if got, want := popAll(&q), "7 1 5 6 2 8 3 4 "; got != want {
		t.Fatalf("pop order %q, want %q", got, want)
	}
	if q.Len() != 0 || q.Bytes() != 0 {
		t.Fatalf("empty queue holds %d items, %d bytes", q.Len(), q.Bytes())
	}
}

// A requeued item is served next in its band, before its flow's others.
func TestQueueRequeue(t *testing.T) {
	q := NewQueue(100, 1<<20)
	push(t, &q, 1, 0, "a")
	push(t, &q, 2, 0, "a")
	push(t, &q, 3, 0, "b")
	it, _ := q.Pop()
	if !q.Requeue(it) {
		t.Fatal("requeue refused")
	}
	if got, want := popAll(&q), "1 3 2 "; got != want {
		t.Fatalf("after requeue %q, want %q", got, want)
	}
}

// Past a bound the newest items of the lowest band below the newcomer go
// first; a newcomer that would need its own band's or a higher band's
// items evicted is refused and evicts nothing; a byte bound works alike.
func TestQueueEviction(t *testing.T) {
	q := NewQueue(3, 1<<20)
	push(t, &q, 1, -1, "a")
	push(t, &q, 2, -1, "a")
	push(t, &q, 3, 0, "a")
	ev := push(t, &q, 4, 5, "a")
	if len(ev) != 1 || ev[0].ID != 2 {
		t.Fatalf("evicted %+v, want item 2 (newest of the lowest band)", ev)
	}
	if _, ok := q.Push(QueueItem{ID: 5, Band: -1, Flow: "a", Bytes: 1}); ok {
		t.Fatal("a lowest-band newcomer displaced an item of its own band")
	}
	if got, want := popAll(&q), "4 3 1 "; got != want {
		t.Fatalf("left %q, want %q", got, want)
	}
	b := NewQueue(100, 25)
	push(t, &b, 1, 0, "a")
	push(t, &b, 2, 0, "a")
	if _, ok := b.Push(QueueItem{ID: 3, Band: 0, Flow: "b", Bytes: 10}); ok {
		t.Fatal("past the byte bound with nothing lower to evict: accepted")
	}
	if _, ok := b.Push(QueueItem{ID: 4, Band: 1, Bytes: 30}); ok {
		t.Fatal("an item larger than the byte bound was accepted")
	}
	if ev := push(t, &b, 5, 1, "c"); len(ev) != 1 || ev[0].ID != 2 || b.Bytes() != 20 {
		t.Fatalf("byte bound: evicted %+v, %d bytes", ev, b.Bytes())
	}
}

// Remove and Expired take items out wherever they are; the round-robin
// goes on over the flows left.
func TestQueueRemoveAndExpire(t *testing.T) {
	q := NewQueue(100, 1<<20)
	push(t, &q, 1, 0, "a") // deadline t0+1s
	push(t, &q, 2, 0, "b")
	push(t, &q, 3, 0, "c")
	push(t, &q, 4, 0, "a")
	if !q.Remove(2) || q.Remove(2) {
		t.Fatal("Remove(2) twice: want true then false")
	}
	ex := q.Expired(t0.Add(3 * time.Second))
	if len(ex) != 2 || ex[0].ID != 1 || ex[1].ID != 3 {
		t.Fatalf("expired %+v, want 1 and 3", ex)
	}
	if got := popAll(&q); got != "4 " {
		t.Fatalf("left %q, want 4", got)
	}
}
