package coalescer_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

// item is one unit of an event stream: a stored block (with its parent), a
// removed hash, or a clear. Flattening inputs and outputs into items lets the
// property test compare them regardless of how events were merged or split.
type item struct {
	kind      messages.EventKind
	tier      messages.StorageTier
	session   string
	hash      messages.ExternalHash
	tokens    messages.LocalHash
	hasParent bool
	parent    messages.ExternalHash
}

func (it item) String() string {
	return fmt.Sprintf("{%v %v %q h%d t%d p%v:%d}", it.kind, it.tier, it.session, it.hash, it.tokens, it.hasParent, it.parent)
}

// flatten appends the items of one event.
func flatten(dst []item, tier messages.StorageTier, session string, e *messages.KvCacheEvent) []item {
	base := item{kind: e.Kind, tier: tier, session: session}
	switch e.Kind {
	case messages.KindStored:
		for i, b := range e.Blocks {
			it := base
			it.hash, it.tokens = b.BlockHash, b.TokensHash
			if i == 0 {
				it.hasParent = e.HasParent
				if e.HasParent {
					it.parent = e.ParentHash
				}
			} else {
				it.hasParent, it.parent = true, e.Blocks[i-1].BlockHash
			}
			dst = append(dst, it)
		}
	case messages.KindRemoved:
		for _, h := range e.Removed {
			it := base
			it.hash = h
			dst = append(dst, it)
		}
	case messages.KindCleared:
		dst = append(dst, base)
	}
	return dst
}

type tierHash struct {
	tier messages.StorageTier
	hash messages.ExternalHash
}

// truth is the naive reference model fed the inputs one by one: live stores
// per (tier, engine hash) with the reference-count rule. It also says which
// removed hashes must reach the index.
type truth map[tierHash]int

// apply applies one input of the stream and returns its items that must be
// emitted (a removed hash only when its count drops to zero or was zero).
func (m truth) apply(ev *messages.PlacementEvent) []item {
	if ev.Placement.Worker != key {
		return nil
	}
	items := flatten(nil, ev.Placement.Tier, ev.SessionID, &ev.Event)
	switch ev.Event.Kind {
	case messages.KindStored:
		for _, it := range items {
			m[tierHash{it.tier, it.hash}]++
		}
	case messages.KindRemoved:
		kept := items[:0]
		for _, it := range items {
			k := tierHash{it.tier, it.hash}
			if m[k] > 1 {
				m[k]--
				continue
			}
			delete(m, k)
			kept = append(kept, it)
		}
		items = kept
	case messages.KindCleared:
		clear(m)
	}
	return items
}

// index is the same model fed the emitted events as the indexer applies
// them: a store adds, a remove drops, a clear empties.
type index map[tierHash]bool

func (m index) apply(ev *messages.RouterEvent) {
	switch ev.Event.Kind {
	case messages.KindStored:
		for _, b := range ev.Event.Blocks {
			m[tierHash{ev.StorageTier, b.BlockHash}] = true
		}
	case messages.KindRemoved:
		for _, h := range ev.Event.Removed {
			delete(m, tierHash{ev.StorageTier, h})
		}
	case messages.KindCleared:
		clear(m)
	}
}

func sameState(tr truth, ix index) error {
	for k, c := range tr {
		if c > 0 && !ix[k] {
			return fmt.Errorf("engine holds %v (%d stores), the index does not", k, c)
		}
	}
	for k := range ix {
		if tr[k] <= 0 {
			return fmt.Errorf("the index holds %v, the engine does not", k)
		}
	}
	return nil
}

// gen makes random event sequences of one stream: a few sessions (with
// runs), tier changes, chains that continue or not, duplicate stores,
// removes of held and unknown hashes, clears, flushes, and inputs that must
// be dropped.
type gen struct {
	r       *rand.Rand
	maxB    int
	session string
	tier    messages.StorageTier
	tails   map[messages.StorageTier]messages.ExternalHash
	pool    []messages.ExternalHash // recently stored hashes
	next    messages.ExternalHash
	inputs  int
}

var (
	genSessions = []string{"", "a", "b", "c"}
	genTiers    = []messages.StorageTier{messages.TierDevice, messages.TierHost, messages.TierDisk}
)

func (g *gen) fresh() messages.ExternalHash { g.next++; return g.next }

func (g *gen) known() messages.ExternalHash {
	if len(g.pool) == 0 {
		return g.fresh()
	}
	return g.pool[g.r.IntN(len(g.pool))]
}

// size picks a block count: usually within the cap, sometimes over it.
func (g *gen) size() int {
	if g.r.IntN(5) == 0 {
		return 1 + g.r.IntN(min(3*g.maxB, 400))
	}
	return 1 + g.r.IntN(min(g.maxB, 40))
}

// op returns the next input, or flush = true.
func (g *gen) op() (ev messages.PlacementEvent, flush bool) {
	if g.r.IntN(4) == 0 {
		g.session = genSessions[g.r.IntN(len(genSessions))]
	}
	if g.r.IntN(7) == 0 {
		g.tier = genTiers[g.r.IntN(len(genTiers))]
	}
	g.inputs++
	ev = messages.PlacementEvent{
		Placement: messages.Placement{Worker: key, Tier: g.tier},
		Event:     messages.KvCacheEvent{DpRank: key.DpRank},
		SessionID: g.session,
	}
	switch n := g.r.IntN(100); {
	case n < 45:
		ev.Event.Kind = messages.KindStored
		switch p := g.r.IntN(100); {
		case p < 55:
			if tail, ok := g.tails[g.tier]; ok {
				ev.Event.HasParent, ev.Event.ParentHash = true, tail
			}
		case p < 70:
			ev.Event.HasParent, ev.Event.ParentHash = true, g.known()
		case p < 85:
			ev.Event.HasParent, ev.Event.ParentHash = true, g.fresh()
		default:
			ev.Event.ParentHash = g.fresh() // not a parent: HasParent is false
		}
		for i := range g.size() {
			h := g.fresh()
			if g.r.IntN(8) == 0 {
				h = g.known() // a duplicate store
			}
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{
				BlockHash: h, TokensHash: messages.LocalHash(g.inputs)<<20 | messages.LocalHash(i),
			})
			if len(g.pool) < 256 {
				g.pool = append(g.pool, h)
			} else {
				g.pool[g.r.IntN(len(g.pool))] = h
			}
		}
		g.tails[g.tier] = ev.Event.Blocks[len(ev.Event.Blocks)-1].BlockHash
	case n < 75:
		ev.Event.Kind = messages.KindRemoved
		for range g.size() {
			if g.r.IntN(5) == 0 {
				ev.Event.Removed = append(ev.Event.Removed, g.fresh()) // never stored
			} else {
				ev.Event.Removed = append(ev.Event.Removed, g.known())
			}
		}
	case n < 79:
		ev.Event.Kind = messages.KindCleared
	case n < 95:
		return ev, true
	default: // inputs the stream must drop
		switch g.r.IntN(4) {
		case 0:
			ev.Event.Kind = messages.KindStored // empty
		case 1:
			ev.Event.Kind = messages.KindRemoved // empty
		case 2:
			ev.Event.Kind = messages.KindStored
			ev.Event.Blocks = []messages.StoredBlock{{BlockHash: g.known()}}
			ev.Placement.Worker.DpRank++ // another stream
		case 3:
			ev.Event.Kind = 0
		}
	}
	return ev, false
}

// continues reports whether b may share an emitted event with the item a
// just before it.
func continues(a, b item) bool {
	if a.kind != b.kind || a.tier != b.tier || a.session != b.session || a.kind == messages.KindCleared {
		return false
	}
	return a.kind == messages.KindRemoved || (b.hasParent && b.parent == a.hash)
}

func TestRandomSequences(t *testing.T) {
	const sequences = 1000
	caps := []int{1, 2, 3, 4, 5, 8, 16, 128}
	var total coalescer.Stats
	var inputs, outputs, items int
	for seed := range uint64(sequences) {
		r := rand.New(rand.NewPCG(seed, 0x6b76726f75746572))
		g := &gen{r: r, maxB: caps[r.IntN(len(caps))], tails: map[messages.StorageTier]messages.ExternalHash{}}
		st, n, err := runSequence(g, 20+r.IntN(130))
		if err != nil {
			t.Fatalf("seed %d (MaxBlocks %d): %v", seed, g.maxB, err)
		}
		total.Merged += st.Merged
		total.Split += st.Split
		total.SessionFlushes += st.SessionFlushes
		total.CapFlushes += st.CapFlushes
		total.OwnerFlushes += st.OwnerFlushes
		total.FilteredHashes += st.FilteredHashes
		total.DroppedRemoves += st.DroppedRemoves
		total.DroppedEmpty += st.DroppedEmpty
		total.Invalid += st.Invalid
		total.Emitted[messages.KindCleared] += st.Emitted[messages.KindCleared]
		total.Pushed += st.Pushed
		inputs += int(st.Pushed)
		outputs += int(st.Emitted[1] + st.Emitted[2] + st.Emitted[3])
		items += n
	}
	t.Logf("%d sequences: %d inputs, %d emitted events, %d items; %+v", sequences, inputs, outputs, items, total)
	// The generator must exercise every rule, or the properties prove little.
	for name, v := range map[string]uint64{
		"merged": total.Merged, "split": total.Split, "session flushes": total.SessionFlushes,
		"cap flushes": total.CapFlushes, "owner flushes": total.OwnerFlushes,
		"filtered hashes": total.FilteredHashes, "dropped removes": total.DroppedRemoves,
		"dropped empty": total.DroppedEmpty, "invalid": total.Invalid, "clears": total.Emitted[messages.KindCleared],
	} {
		if v == 0 {
			t.Errorf("no %s in %d sequences", name, sequences)
		}
	}
}

// runSequence feeds ops random inputs and flushes to one Stream, checking
// the properties after every step, and returns the Stream's stats and the
// number of items emitted.
func runSequence(g *gen, ops int) (coalescer.Stats, int, error) {
	s := coalescer.New(key, coalescer.Config{MaxBlocks: g.maxB})
	tr, ix := truth{}, index{}
	var (
		want, got  []item // items that must be emitted, items emitted, in order
		origin     []int  // input number of each wanted item
		inputKinds []messages.EventKind
		emitted    []messages.RouterEvent
		snapshots  []string
		lastID     uint64
		lastKept   = -1 // index in want of the last item of the last kept input
	)
	for step := range ops + 1 {
		ev, flush := g.op()
		if step == ops {
			flush = true // always end with a flush
		}
		before := len(emitted)
		wantBefore := len(want)
		if flush {
			emitted = s.Flush(emitted)
		} else {
			in := len(inputKinds)
			inputKinds = append(inputKinds, ev.Event.Kind)
			items := tr.apply(&ev)
			for range items {
				origin = append(origin, in)
			}
			want = append(want, items...)
			emitted = s.Push(ev, emitted)
			// The caller may reuse its buffers once Push returns.
			for i := range ev.Event.Blocks {
				ev.Event.Blocks[i] = messages.StoredBlock{BlockHash: 1 << 62, TokensHash: 1 << 62}
			}
			for i := range ev.Event.Removed {
				ev.Event.Removed[i] = 1 << 62
			}
		}
		where := func(format string, args ...any) error {
			return fmt.Errorf("step %d (flush %v, input %+v): %s", step, flush, ev, fmt.Sprintf(format, args...))
		}

		// Each new event: dense id, within the cap, one session, clears alone.
		for _, out := range emitted[before:] {
			snapshots = append(snapshots, format(out))
			lastID++
			e := &out.Event
			if e.EventID != lastID {
				return s.Stats(), 0, where("event id %d, want %d (ids dense from 1)", e.EventID, lastID)
			}
			if out.WorkerID != key.Worker || e.DpRank != key.DpRank {
				return s.Stats(), 0, where("event %d of worker %d rank %d", e.EventID, out.WorkerID, e.DpRank)
			}
			if n := len(e.Blocks) + len(e.Removed); n > g.maxB {
				return s.Stats(), 0, where("event %d has %d blocks, cap %d", e.EventID, n, g.maxB)
			}
			start := len(got)
			got = flatten(got, out.StorageTier, out.SessionID, e)
			if len(got) == start {
				return s.Stats(), 0, where("event %d is empty: %+v", e.EventID, out)
			}
			if len(got) > len(want) {
				return s.Stats(), 0, where("event %d emits more items than the inputs gave", e.EventID)
			}
			// Order (4): the outputs' items are the inputs' items, in order,
			// without the filtered removes.
			for i := start; i < len(got); i++ {
				if got[i] != want[i] {
					return s.Stats(), 0, where("item %d of event %d is %v, want %v (from input %d)", i, e.EventID, got[i], want[i], origin[i])
				}
			}
			// Provenance (1): every input behind the event has its session.
			for i := start; i < len(got); i++ {
				if want[i].session != out.SessionID {
					return s.Stats(), 0, where("event %d (session %q) holds an item of input %d, session %q",
						e.EventID, out.SessionID, origin[i], want[i].session)
				}
			}
			if e.Kind == messages.KindCleared {
				if len(got)-start != 1 || inputKinds[origin[start]] != messages.KindCleared {
					return s.Stats(), 0, where("clear %d not alone", e.EventID)
				}
			}
			ix.apply(&out)
		}
		if s.LastEventID() != lastID {
			return s.Stats(), 0, where("LastEventID %d, want %d", s.LastEventID(), lastID)
		}

		// At most one pending event: the items not yet emitted form one
		// mergeable run, within the cap.
		pend := want[len(got):]
		if s.Pending() != (len(pend) > 0) {
			return s.Stats(), 0, where("Pending() = %v with %d items not emitted", s.Pending(), len(pend))
		}
		if flush && len(pend) > 0 {
			return s.Stats(), 0, where("%d items still pending after Flush", len(pend))
		}
		if len(pend) > g.maxB {
			return s.Stats(), 0, where("%d items pending, cap %d", len(pend), g.maxB)
		}
		for i := 1; i < len(pend); i++ {
			if !continues(pend[i-1], pend[i]) {
				return s.Stats(), 0, where("pending items %v and %v cannot be one event", pend[i-1], pend[i])
			}
		}

		// Flush first (5): an input that does not continue the previous
		// kept one (other session, tier, kind, or a chain break) leaves only
		// after everything before it.
		if len(want) > wantBefore {
			if lastKept >= 0 && !continues(want[lastKept], want[wantBefore]) && len(got) < wantBefore {
				return s.Stats(), 0, where("input does not continue %v but %d earlier items are still pending",
					want[lastKept], wantBefore-len(got))
			}
			lastKept = len(want) - 1
		}

		// State (3): whenever nothing is pending, the index built from the
		// emitted events equals the engine's cache built from the inputs.
		if !s.Pending() {
			if err := sameState(tr, ix); err != nil {
				return s.Stats(), 0, where("%v", err)
			}
		}
	}
	if len(got) != len(want) {
		return s.Stats(), 0, fmt.Errorf("%d items emitted, %d wanted", len(got), len(want))
	}
	// Emitted events never changed afterwards (no aliasing).
	for i := range emitted {
		if f := format(emitted[i]); f != snapshots[i] {
			return s.Stats(), 0, fmt.Errorf("event %d changed after emission: %q, was %q", i+1, f, snapshots[i])
		}
	}
	return s.Stats(), len(got), nil
}
