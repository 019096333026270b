package predicted

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvrouter/kvrouter/actors/internal/hashtab"
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
	// Collisions counts blocks not predicted because another (block,
	// worker) pair had the same table key.
	Collisions uint64
	Blocks     int
}

// Overlap is one worker's predicted prefix: contiguous blocks from block 0.
type Overlap struct {
	Key    messages.WorkerKey
	Blocks uint32
	// Confirmed is how many of Blocks, from block 0, the confirmed
	// overlap gave (Overlaps' confirmed); the rest are predicted.
	Confirmed uint32
	// Waiting counts the requests recorded on Key with this block 0 since
	// an event last confirmed it there (0 once confirmed, and always for
	// an event-less worker): requests whose prefills are queued or running
	// there, that the predicted blocks wait on.
	Waiting uint32
}

const none = -1

// entry is one predicted (worker, block). It sits on one LRU list (its
// worker's for an event-less worker, the shared one otherwise) and, keyed
// by (hash, worker), in the pair table; an entry predicted as some
// request's block 0 also on its hash's chain (how a lookup finds the
// workers to walk); confirmed entries also in their worker's engine-hash
// map.
type entry struct {
	hash       messages.LocalHash
	key        messages.WorkerKey
	ext        messages.ExternalHash
	expires    int64 // ns since the epoch
	list       int32
	prev, next int32 // LRU list, head newest
	hprev      int32 // chain of the block-0 entries of one hash
	hnext      int32
	confirmed  bool
	first      bool // on its hash's chain
	// waiting counts the requests recorded with this block 0 on an
	// event-publishing worker since an event last confirmed it
	// (Overlap.Waiting).
	waiting uint32
}

// pairKey combines a block's hash and a worker into the pair table's key.
// Distinct pairs may share one (the table checks the entry it finds): such
// a pair is not predicted, counted in Stats.Collisions.
func pairKey(h messages.LocalHash, k messages.WorkerKey) uint64 {
	return uint64(h) ^ (uint64(k.Worker)*0x9E3779B97F4A7C15 + uint64(k.DpRank)*0xC2B2AE3D27D4EB4F)
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
	pairs   hashtab.Map[uint64, int32]   // pairKey → entry
	chains  map[messages.LocalHash]int32 // head of the hash's chain of block-0 entries
	lists   []lru                        // 0: the shared list of event-publishing workers
	freeLs  []int32
	workers map[messages.WorkerKey]*worker
	stats   Stats
}

// New returns an empty table.
func New(cfg Config) (*Table, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &Table{cfg: c, chains: map[messages.LocalHash]int32{},
		workers: map[messages.WorkerKey]*worker{}}
	t.lists = []lru{{head: none, tail: none, capacity: c.MaxBlocks, ttl: c.TTL}}
	return t, nil
}

// Config returns the configuration with defaults applied.
func (t *Table) Config() Config { return t.cfg }

// Stats returns the counters.
func (t *Table) Stats() Stats { s := t.stats; s.Blocks = t.pairs.Len(); return s }

// lookup returns the entry predicting block h on k.
func (t *Table) lookup(h messages.LocalHash, k messages.WorkerKey) (int32, bool) {
	i, ok := t.pairs.Get(pairKey(h, k))
	if ok && t.entries[i].hash == h && t.entries[i].key == k {
		return i, true
	}
	return none, false
}

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
// predicted. confirmed is k's overlap in the index: blocks 1 to
// confirmed − 1 are skipped (Overlaps walks from the confirmed overlap;
// block 0 is always recorded, it is how a lookup finds k). Nothing is
// recorded for an event-publishing worker when predictions are off.
func (t *Table) Record(k messages.WorkerKey, hashes []messages.LocalHash, confirmed uint32, now time.Time) {
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
	from := max(1, min(int(confirmed), len(hashes)))
	if l.n+1+len(hashes)-from > l.capacity {
		// Room has to be made: refresh the blocks already predicted first
		// (off the tail), so that evicting never takes the request's own.
		fresh := 0
		for j, h := range hashes {
			if j > 0 && j < from {
				continue
			}
			if i, ok := t.lookup(h, k); ok {
				t.unlink(i)
				t.pushFront(li, i)
			} else {
				fresh++
			}
		}
		for l.n+fresh > l.capacity {
			t.evict(l.tail)
		}
	}
	// Last block first: the prompt's first blocks end up newest, so the
	// LRU evicts a prompt's tail before the prefix other prompts share.
	for j := len(hashes) - 1; j >= 0; j-- {
		if j > 0 && j < from {
			j = 1 // the confirmed blocks: on to block 0
			continue
		}
		t.stats.Recorded++
		h := hashes[j]
		i, ok := t.lookup(h, k)
		if ok {
			t.entries[i].expires = exp
			t.unlink(i)
			t.pushFront(li, i)
		} else {
			pk := pairKey(h, k)
			if t.pairs.Has(pk) {
				t.stats.Collisions++
				continue
			}
			i = t.alloc()
			t.entries[i] = entry{hash: h, key: k, expires: exp, list: li, prev: none, next: none, hprev: none, hnext: none}
			t.pushFront(li, i)
			t.pairs.Put(pk, i)
		}
		if j == 0 {
			e := &t.entries[i]
			if !e.first {
				t.chain(i)
			}
			if li == 0 && !e.confirmed && e.waiting < math.MaxUint32 {
				e.waiting++
			}
		}
	}
}

// chain puts entry i on its hash's chain of block-0 entries.
func (t *Table) chain(i int32) {
	e := &t.entries[i]
	e.first, e.hprev, e.hnext = true, none, none
	if head, ok := t.chains[e.hash]; ok {
		e.hnext = head
		t.entries[head].hprev = i
	}
	t.chains[e.hash] = i
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
// the number of contiguous blocks of hashes from block 0 it holds: its
// confirmed overlap (confirmed(worker), the index's; nil: none) continued
// by predicted blocks (expired predictions count as absent).
func (t *Table) Overlaps(hashes []messages.LocalHash, now time.Time, confirmed func(messages.WorkerKey) uint32, out []Overlap) []Overlap {
	if len(hashes) == 0 || t.pairs.Len() == 0 {
		return out
	}
	ns := now.UnixNano()
	head, ok := t.chains[hashes[0]]
	if !ok {
		return out
	}
	for i := head; i != none; i = t.entries[i].hnext {
		e := &t.entries[i]
		if e.expires <= ns {
			continue
		}
		var c uint32
		if confirmed != nil {
			c = min(confirmed(e.key), uint32(len(hashes)))
		}
		o := Overlap{Key: e.key, Blocks: max(c, 1), Confirmed: c}
		if !e.confirmed {
			o.Waiting = e.waiting
		}
		for d := int(o.Blocks); d < len(hashes); d++ {
			j, ok := t.lookup(hashes[d], e.key)
			if !ok || t.entries[j].expires <= ns {
				break
			}
			o.Blocks++
		}
		out = append(out, o)
	}
	return out
}
