package predicted

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// Defaults (doc.go, "Defaults").
const (
	// DefaultTTL is how long a prediction on a worker that publishes events
	// lives unconfirmed.
	DefaultTTL = 2 * time.Second
	// DefaultMaxBlocks caps the predictions on event-publishing workers.
	DefaultMaxBlocks = 1 << 18
	// DefaultEventLessTTL is how long an event-less worker's block lives
	// without being routed again.
	DefaultEventLessTTL = 120 * time.Second
	// DefaultEventLessBlocks is an event-less worker's cache size when its
	// registration names none.
	DefaultEventLessBlocks = 16384
	// MaxEventLessBlocks bounds one event-less worker's cache size.
	MaxEventLessBlocks = 1 << 20
)

// ErrInvalidConfig: a negative TTL or cap.
var ErrInvalidConfig = errors.New("invalid prediction config")

// Config bounds a Table. The zero value of a field means its default; a
// TTL of Off disables predictions on event-publishing workers (event-less
// workers are still predicted: it is all the router knows of them).
type Config struct {
	TTL          time.Duration
	MaxBlocks    int
	EventLessTTL time.Duration
	// EventLessBlocks is the cache size of an event-less worker registered
	// without one (DefaultEventLessBlocks; at most MaxEventLessBlocks).
	EventLessBlocks int
}

// Off, as Config.TTL, turns predictions on event-publishing workers off.
const Off = time.Duration(-1)

func (c Config) withDefaults() (Config, error) {
	if c.TTL < Off || c.MaxBlocks < 0 || c.EventLessTTL < 0 || c.EventLessBlocks < 0 || c.EventLessBlocks > MaxEventLessBlocks {
		return c, fmt.Errorf("predicted: ttl %v, max blocks %d, event-less ttl %v, event-less blocks %d (at most %d): %w",
			c.TTL, c.MaxBlocks, c.EventLessTTL, c.EventLessBlocks, MaxEventLessBlocks, ErrInvalidConfig)
	}
	if c.EventLessBlocks == 0 {
		c.EventLessBlocks = DefaultEventLessBlocks
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxBlocks == 0 {
		c.MaxBlocks = DefaultMaxBlocks
	}
	if c.EventLessTTL == 0 {
		c.EventLessTTL = DefaultEventLessTTL
	}
	return c, nil
}

// Stats counts what the table did. Counters only grow; Blocks is the
// current size.
type Stats struct {
	Recorded  uint64 // (worker, block) predictions made or refreshed
	Confirmed uint64 // predictions a BlockStored of the same block confirmed
	Killed    uint64 // predictions a BlockRemoved or a clear ended
	Expired   uint64 // predictions that lived out their TTL
	Evicted   uint64 // predictions dropped for the cap or a worker's capacity (LRU)
	Blocks    int
}

// Overlap is one worker's predicted prefix: contiguous blocks from block 0.
type Overlap struct {
	Key    messages.WorkerKey
	Blocks uint32
}

const none = -1

// entry is one predicted (worker, block). It sits on one LRU list (its
// worker's for an event-less worker, the shared one otherwise) and, keyed
// by (hash, worker), in the pair map; confirmed entries also in their
// worker's engine-hash map.
type entry struct {
	hash       messages.LocalHash
	key        messages.WorkerKey
	ext        messages.ExternalHash
	confirmed  bool
	expires    int64 // ns since the epoch
	list       int32
	prev, next int32 // LRU list, head newest
	hprev      int32 // chain of the entries of one hash
	hnext      int32
}

type pair struct {
	hash messages.LocalHash
	key  messages.WorkerKey
}

type lru struct {
	head, tail int32
	n          int
	capacity   int // 0: the table's cap
	ttl        time.Duration
}

// worker is a (worker, dp_rank)'s state: its event-less list (none when it
// publishes events) and its confirmed entries by engine hash.
type worker struct {
	list int32
	ext  map[messages.ExternalHash]int32
}

// Table is the prediction side structure of one namespace (doc.go). A
// plain value for one goroutine: no clock, no goroutines.
type Table struct {
	cfg     Config
	entries []entry
	free    []int32
	pairs   map[pair]int32
	chains  map[messages.LocalHash]int32 // head of the hash's chain
	lists   []lru                        // 0: the shared list of event-publishing workers
	freeLs  []int32
	workers map[messages.WorkerKey]*worker
	stats   Stats
	scratch []int32 // Record's entry per block
}

// New returns an empty table.
func New(cfg Config) (*Table, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Table{cfg: c, pairs: map[pair]int32{}, chains: map[messages.LocalHash]int32{},
		workers: map[messages.WorkerKey]*worker{}}
	t.lists = []lru{{head: none, tail: none, capacity: c.MaxBlocks, ttl: c.TTL}}
	return t, nil
}

// Config returns the configuration with defaults applied.
func (t *Table) Config() Config { return t.cfg }

// Stats returns the counters.
func (t *Table) Stats() Stats { s := t.stats; s.Blocks = len(t.pairs); return s }

// Predicting reports whether workers that publish events get predictions.
func (t *Table) Predicting() bool { return t.cfg.TTL > 0 }

// SetEventLess makes k an event-less worker with a cache of capacity blocks
// (0: Config.EventLessBlocks; clamped to MaxEventLessBlocks), or, with
// capacity < 0, a worker that publishes events. A mode change drops the
// worker's predictions; a new capacity evicts down to it.
func (t *Table) SetEventLess(k messages.WorkerKey, capacity int) {
	if capacity == 0 {
		capacity = t.cfg.EventLessBlocks
	}
	capacity = min(capacity, MaxEventLessBlocks)
	w := t.workers[k]
	eventLess := capacity > 0
	if w != nil && (w.list != none) == eventLess {
		if eventLess {
			l := &t.lists[w.list]
			l.capacity = capacity
			for l.n > l.capacity {
				t.evict(l.tail)
			}
		}
		return
	}
	if w != nil {
		t.DropKey(k)
	}
	if !eventLess {
		return
	}
	w = &worker{list: t.newList(capacity)}
	t.workers[k] = w
}

// DropKey forgets every prediction of one (worker, dp_rank) and its mode.
func (t *Table) DropKey(k messages.WorkerKey) {
	w := t.workers[k]
	if w == nil {
		return
	}
	t.clearKey(k, w)
	if w.list != none {
		t.freeLs = append(t.freeLs, w.list)
		t.lists[w.list] = lru{}
	}
	delete(t.workers, k)
}

// DropWorker forgets every rank of an unregistered worker.
func (t *Table) DropWorker(id messages.WorkerID) {
	for k := range t.workers {
		if k.Worker == id {
			t.DropKey(k)
		}
	}
	t.killWhere(func(e *entry) bool { return e.key.Worker == id }, false)
}

// EventLess reports whether k is an event-less worker.
func (t *Table) EventLess(k messages.WorkerKey) bool {
	w := t.workers[k]
	return w != nil && w.list != none
}

// Len returns the blocks an event-less worker k is predicted to hold (0 for
// a worker that publishes events: its predictions are short-lived and
// counted in Stats only).
func (t *Table) Len(k messages.WorkerKey) int {
	if w := t.workers[k]; w != nil && w.list != none {
		return t.lists[w.list].n
	}
	return 0
}

// EventLessBlocks returns the predicted blocks of every event-less worker.
func (t *Table) EventLessBlocks() map[messages.WorkerKey]int {
	out := map[messages.WorkerKey]int{}
	for k, w := range t.workers {
		if w.list != none {
			out[k] = t.lists[w.list].n
		}
	}
	return out
}

// Record predicts the request's blocks on k, the worker it was routed to:
// each block is added, or refreshed (TTL and LRU position) when already
// predicted. Nothing is recorded for an event-publishing worker when
// predictions are off.
func (t *Table) Record(k messages.WorkerKey, hashes []messages.LocalHash, now time.Time) {
	if len(hashes) == 0 {
		return
	}
	li := int32(0)
	if w := t.workers[k]; w != nil && w.list != none {
		li = w.list
	} else if !t.Predicting() {
		return
	}
	t.expireList(li, now)
	l := &t.lists[li]
	exp := now.Add(l.ttl).UnixNano()
	// Blocks beyond a list's capacity would only evict the request's own
	// first blocks: keep its prefix.
	if len(hashes) > l.capacity {
		hashes = hashes[:l.capacity]
	}
	// The blocks already predicted are refreshed first (moved off the
	// tail), so making room for the new ones never evicts the request's
	// own blocks.
	idx := t.scratch[:0]
	fresh := 0
	for _, h := range hashes {
		i, ok := t.pairs[pair{h, k}]
		if ok {
			t.unlink(i)
			t.pushFront(li, i)
		} else {
			i = none
			fresh++
		}
		idx = append(idx, i)
	}
	t.scratch = idx
	for l.n+fresh > l.capacity {
		t.evict(l.tail)
	}
	// Then every block again, last block first: the prompt's first blocks
	// end up newest, so the LRU evicts a prompt's tail before the prefix
	// other prompts share.
	for j := len(hashes) - 1; j >= 0; j-- {
		t.stats.Recorded++
		if i := idx[j]; i != none {
			t.entries[i].expires = exp
			t.unlink(i)
			t.pushFront(li, i)
			continue
		}
		h := hashes[j]
		if i, dup := t.pairs[pair{h, k}]; dup { // a hash repeated in the request (hashes sent by a client)
			t.entries[i].expires = exp
			continue
		}
		i := t.alloc()
		t.entries[i] = entry{hash: h, key: k, expires: exp, list: li, prev: none, next: none, hprev: none, hnext: none}
		t.pushFront(li, i)
		t.pairs[pair{h, k}] = i
		if head, ok := t.chains[h]; ok {
			t.entries[i].hnext = head
			t.entries[head].hprev = i
		}
		t.chains[h] = i
	}
}

// Expire drops the shared list's predictions whose TTL has passed (an
// event-less worker's list is expired when it is recorded into; a lookup
// never counts an expired block).
func (t *Table) Expire(now time.Time) { t.expireList(0, now) }

func (t *Table) expireList(li int32, now time.Time) {
	ns := now.UnixNano()
	l := &t.lists[li]
	for l.tail != none && t.entries[l.tail].expires <= ns {
		t.stats.Expired++
		t.remove(l.tail)
	}
}

// Overlaps appends to out, for every worker with a prediction of block 0,
// the number of contiguous predicted blocks of hashes from block 0 (expired
// predictions count as absent).
func (t *Table) Overlaps(hashes []messages.LocalHash, now time.Time, out []Overlap) []Overlap {
	if len(hashes) == 0 || len(t.pairs) == 0 {
		return out
	}
	ns := now.UnixNano()
	start := len(out)
	head, ok := t.chains[hashes[0]]
	if !ok {
		return out
	}
	for i := head; i != none; i = t.entries[i].hnext {
		if e := &t.entries[i]; e.expires > ns {
			out = append(out, Overlap{Key: e.key, Blocks: 1})
		}
	}
	alive := out[start:]
	for d := 1; d < len(hashes) && len(alive) > 0; d++ {
		n := 0
		for j := range alive {
			if i, ok := t.pairs[pair{hashes[d], alive[j].Key}]; ok && t.entries[i].expires > ns {
				alive[j].Blocks++
				alive[n], alive[j] = alive[j], alive[n]
				n++
			}
		}
		alive = alive[:n]
	}
	return out
}

// Apply follows one event the index applied: a BlockStored of a predicted
// block confirms it (its engine hash is kept, so a later BlockRemoved finds
// it), a BlockRemoved kills the confirmed predictions it names, a clear
// kills every prediction of the stream. Event-less workers publish no
// events; one that does is treated the same way.
func (t *Table) Apply(ev messages.RouterEvent) {
	if len(t.pairs) == 0 {
		return
	}
	k := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	switch ev.Event.Kind {
	case messages.KindStored:
		for _, b := range ev.Event.Blocks {
			i, ok := t.pairs[pair{b.TokensHash, k}]
			if !ok {
				continue
			}
			w := t.workerOf(k)
			e := &t.entries[i]
			if e.confirmed {
				delete(w.ext, e.ext)
			} else {
				t.stats.Confirmed++
			}
			e.ext, e.confirmed = b.BlockHash, true
			w.ext[b.BlockHash] = i
		}
	case messages.KindRemoved:
		w := t.workers[k]
		if w == nil || len(w.ext) == 0 {
			return
		}
		for _, h := range ev.Event.Removed {
			if i, ok := w.ext[h]; ok {
				t.stats.Killed++
				t.remove(i)
			}
		}
	case messages.KindCleared:
		t.Clear(k)
	}
}

// Clear kills every prediction of k (the stream was cleared).
func (t *Table) Clear(k messages.WorkerKey) {
	if w := t.workers[k]; w != nil {
		t.clearKey(k, w)
		return
	}
	t.killWhere(func(e *entry) bool { return e.key == k }, true)
}

// clearKey kills k's predictions: its own list for an event-less worker,
// else its entries on the shared list.
func (t *Table) clearKey(k messages.WorkerKey, w *worker) {
	if w.list == none {
		t.killWhere(func(e *entry) bool { return e.key == k }, true)
		return
	}
	for t.lists[w.list].tail != none {
		t.stats.Killed++
		t.remove(t.lists[w.list].tail)
	}
}

// killWhere removes the shared list's entries that match.
func (t *Table) killWhere(match func(*entry) bool, count bool) {
	for i := t.lists[0].head; i != none; {
		next := t.entries[i].next
		if match(&t.entries[i]) {
			if count {
				t.stats.Killed++
			}
			t.remove(i)
		}
		i = next
	}
}

// workerOf returns k's state, creating it (event-publishing) if needed.
func (t *Table) workerOf(k messages.WorkerKey) *worker {
	w := t.workers[k]
	if w == nil {
		w = &worker{list: none}
		t.workers[k] = w
	}
	if w.ext == nil {
		w.ext = map[messages.ExternalHash]int32{}
	}
	return w
}

func (t *Table) evict(i int32) {
	t.stats.Evicted++
	t.remove(i)
}

// remove drops entry i from every structure and frees it.
func (t *Table) remove(i int32) {
	e := &t.entries[i]
	t.unlink(i)
	delete(t.pairs, pair{e.hash, e.key})
	if e.hprev != none {
		t.entries[e.hprev].hnext = e.hnext
	} else if e.hnext != none {
		t.chains[e.hash] = e.hnext
	} else {
		delete(t.chains, e.hash)
	}
	if e.hnext != none {
		t.entries[e.hnext].hprev = e.hprev
	}
	if e.confirmed {
		if w := t.workers[e.key]; w != nil {
			delete(w.ext, e.ext)
			if len(w.ext) == 0 && w.list == none {
				delete(t.workers, e.key) // an event-publishing worker keeps no state without predictions
			}
		}
	}
	*e = entry{}
	t.free = append(t.free, i)
}

func (t *Table) alloc() int32 {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return i
	}
	t.entries = append(t.entries, entry{})
	return int32(len(t.entries) - 1)
}

func (t *Table) newList(capacity int) int32 {
	l := lru{head: none, tail: none, capacity: capacity, ttl: t.cfg.EventLessTTL}
	if n := len(t.freeLs); n > 0 {
		i := t.freeLs[n-1]
		t.freeLs = t.freeLs[:n-1]
		t.lists[i] = l
		return i
	}
	t.lists = append(t.lists, l)
	return int32(len(t.lists) - 1)
}

func (t *Table) pushFront(li, i int32) {
	l := &t.lists[li]
	e := &t.entries[i]
	e.list, e.prev, e.next = li, none, l.head
	if l.head != none {
		t.entries[l.head].prev = i
	} else {
		l.tail = i
	}
	l.head = i
	l.n++
}

func (t *Table) unlink(i int32) {
	e := &t.entries[i]
	l := &t.lists[e.list]
	if e.prev != none {
		t.entries[e.prev].next = e.next
	} else {
		l.head = e.next
	}
	if e.next != none {
		t.entries[e.next].prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = none, none
	l.n--
}
