package registry

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Worker is what a registration says about one stream (POST /register).
type Worker struct {
	Model, Tenant  string
	BlockSize      uint32
	Endpoint       string
	ReplayEndpoint string
	Lora           string
	// ServingEndpoint is where the request path sends the rank's requests
	// ("" when the registration named none).
	ServingEndpoint string
	// Engine is the registration's engine choice ("" from a member that
	// predates it: the reader's default).
	Engine string
	// MetricsEndpoint is the engine's metrics URL ("" when the
	// registration named none: the serving endpoint's).
	MetricsEndpoint string
	// Role is the registration's prefill/decode role ("" both, also from
	// a member that predates roles); BootstrapHost and BootstrapPort its
	// SGLang bootstrap address (messages/api.Registration).
	Role          string
	BootstrapHost string
	BootstrapPort uint16
	// Events is "none" for a worker that publishes no KV events (no member
	// follows a stream of it; every member routes it by its predictions),
	// "" otherwise; CacheBlocks its approximate cache size (0: the
	// reader's default).
	Events      string
	CacheBlocks uint32
}

// Version orders the writes of one key: the higher Clock wins, ties
// broken by Origin (the member address that wrote it).
type Version struct {
	Clock  uint64
	Origin string
}

// Compare orders versions: -1, 0 or +1.
func (v Version) Compare(o Version) int {
	return cmp.Or(cmp.Compare(v.Clock, o.Clock), cmp.Compare(v.Origin, o.Origin))
}

// Entry is one key's registration, or its tombstone (Deleted: it was
// unregistered; kept so that an older copy arriving late never brings it
// back).
type Entry struct {
	Key     messages.WorkerKey
	Worker  Worker
	Version Version
	Deleted bool
}

// Table is a replica's entries: per key, the entry of the highest version
// seen. Plain data: merging is commutative, associative and idempotent, so
// copies that saw the same entries are equal whatever the order.
type Table struct {
	entries map[messages.WorkerKey]Entry
	clock   uint64
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{entries: map[messages.WorkerKey]Entry{}} }

// Stamp versions a new write by origin: its clock is above every clock the
// table has seen and at least now (a hybrid logical clock: a member that
// restarted empty still writes above the entries it has not synced yet,
// as long as clocks are roughly in step).
func (t *Table) Stamp(e Entry, origin string, now uint64) Entry {
	t.clock = max(t.clock+1, now)
	e.Version = Version{Clock: t.clock, Origin: origin}
	return e
}

// Merge keeps each entry that is newer than the table's for its key and
// reports whether any was.
func (t *Table) Merge(es ...Entry) bool {
	changed := false
	for _, e := range es {
		t.clock = max(t.clock, e.Version.Clock)
		if old, ok := t.entries[e.Key]; ok && old.Version.Compare(e.Version) >= 0 {
			continue
		}
		t.entries[e.Key] = e
		changed = true
	}
	return changed
}

// Get returns the live (not deleted) entry of a key.
func (t *Table) Get(k messages.WorkerKey) (Entry, bool) {
	e, ok := t.entries[k]
	return e, ok && !e.Deleted
}

// Live returns the live entries, sorted by key.
func (t *Table) Live() []Entry {
	return slices.DeleteFunc(t.All(), func(e Entry) bool { return e.Deleted })
}

// All returns every entry, tombstones included, sorted by key.
func (t *Table) All() []Entry {
	out := slices.Collect(maps.Values(t.entries))
	slices.SortFunc(out, func(a, b Entry) int { return CompareKeys(a.Key, b.Key) })
	return out
}

// CompareKeys orders (worker, dp_rank) keys.
func CompareKeys(a, b messages.WorkerKey) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.DpRank, b.DpRank))
}
