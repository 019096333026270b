package radix

import (
	"cmp"
	"maps"
	"math/bits"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Workers lists the (worker, dp_rank) streams with state (blocks or an
// event-id position), sorted.
func (t *Tree) Workers() []messages.WorkerKey {
	return slices.SortedFunc(maps.Keys(t.streams), compareKeys)
}

func compareKeys(a, b messages.WorkerKey) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.DpRank, b.DpRank))
}

// Blocks returns the engine hashes a stream holds (detached ones included),
// sorted.
func (t *Tree) Blocks(key messages.WorkerKey) []messages.ExternalHash {
	s := t.streams[key]
	if s == nil {
		return nil
	}
	out := make([]messages.ExternalHash, 0, s.size+s.det.size())
	for e, v := range s.lookup.All() {
		if t.valid(s, v) {
			out = append(out, e)
		}
	}
	if s.det != nil {
		out = slices.AppendSeq(out, maps.Keys(s.det.blocks))
	}
	slices.Sort(out)
	return out
}

// TreeSize returns the number of blocks a stream holds (detached included).
func (t *Tree) TreeSize(key messages.WorkerKey) int {
	if s := t.streams[key]; s != nil {
		return s.size + s.det.size()
	}
	return 0
}

// Size is the extent of a Tree.
type Size struct {
	Blocks   int // tree blocks (distinct local-hash paths)
	Entries  int // (tree block, stream) pairs
	Detached int // detached blocks, all streams
	Streams  int
}

// Size returns the tree's extent.
func (t *Tree) Size() Size {
	sz := Size{Blocks: int(t.n) - 1 - t.free, Entries: t.entries, Streams: len(t.streams)}
	for _, s := range t.streams {
		sz.Detached += s.det.size()
	}
	return sz
}

// Dump returns Stored events that rebuild the tree's blocks when applied to
// an empty Tree: per stream (sorted), its tree blocks depth first as
// parent-linked chains of at most DumpMaxBlocks blocks on each block's
// fastest tier, then its detached chains under their unknown parents, then
// one single-block Stored per further tier or engine-hash alias. Event ids
// are 0 (unsequenced), so a dump can be applied to a tree that follows live
// streams without moving their id positions.
func (t *Tree) Dump() []messages.RouterEvent {
	var out []messages.RouterEvent
	for _, k := range t.Workers() {
		out = t.dumpStream(out, t.streams[k])
	}
	return out
}

type dumper struct {
	key    messages.WorkerKey
	out    []messages.RouterEvent
	cur    int // index in out of the chain being extended, -1: none
	extras []messages.RouterEvent
}

func (d *dumper) event(tier messages.StorageTier, hasParent bool, parent messages.ExternalHash, blocks ...messages.StoredBlock) messages.RouterEvent {
	return messages.RouterEvent{WorkerID: d.key.Worker, StorageTier: tier, Event: messages.KvCacheEvent{
		DpRank: d.key.DpRank, Kind: messages.KindStored, HasParent: hasParent, ParentHash: parent, Blocks: blocks}}
}

// block emits one block: it extends the current chain when that ends with
// the block's parent on the same tier, and sends its other tiers and
// aliases to the extras.
func (d *dumper) block(hasParent bool, parent messages.ExternalHash, b messages.StoredBlock, tiers uint8, aliases []messages.ExternalHash) {
	tier := messages.StorageTier(bits.TrailingZeros8(tiers))
	if ev := d.chain(); ev != nil && hasParent && ev.StorageTier == tier && len(ev.Event.Blocks) < DumpMaxBlocks &&
		ev.Event.Blocks[len(ev.Event.Blocks)-1].BlockHash == parent {
		ev.Event.Blocks = append(ev.Event.Blocks, b)
	} else {
		d.out = append(d.out, d.event(tier, hasParent, parent, b))
		d.cur = len(d.out) - 1
	}
	for more := tiers &^ (1 << tier); more != 0; more &= more - 1 {
		d.extras = append(d.extras, d.event(messages.StorageTier(bits.TrailingZeros8(more)), hasParent, parent, b))
	}
	for _, a := range aliases {
		d.extras = append(d.extras, d.event(tier, hasParent, parent, messages.StoredBlock{BlockHash: a, TokensHash: b.TokensHash}))
	}
}

func (d *dumper) chain() *messages.RouterEvent {
	if d.cur < 0 {
		return nil
	}
	return &d.out[d.cur]
}

func (t *Tree) dumpStream(out []messages.RouterEvent, s *stream) []messages.RouterEvent {
	d := &dumper{key: s.key, out: out, cur: -1}
	rev := map[uint32][]messages.ExternalHash{}
	for e, v := range s.lookup.All() {
		if t.valid(s, v) {
			rev[uint32(v)] = append(rev[uint32(v)], e)
		}
	}
	for _, es := range rev {
		slices.Sort(es)
	}
	// Tree blocks, depth first, children in local-hash order.
	var stack, kids []uint32
	push := func(x uint32) {
		kids = t.appendChildren(kids[:0], x)
		slices.SortFunc(kids, func(a, b uint32) int { return cmp.Compare(t.node(b).hash, t.node(a).hash) })
		for _, c := range kids {
			if t.bitsOf(c, s.id) != 0 {
				stack = append(stack, c)
			}
		}
	}
	push(0)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		es, p := rev[x], t.node(x).parent
		var parent messages.ExternalHash
		if p != 0 {
			parent = rev[p][0]
		}
		d.block(p != 0, parent, messages.StoredBlock{BlockHash: es[0], TokensHash: t.node(x).hash}, t.bitsOf(x, s.id), es[1:])
		push(x)
	}
	// Detached chains, from their unknown parents.
	if det := s.det; det != nil {
		var roots []messages.ExternalHash
		for p := range det.kids {
			if !det.has(p) {
				roots = append(roots, p)
			}
		}
		slices.Sort(roots)
		var st []messages.ExternalHash
		for _, r := range roots {
			d.cur = -1
			st = append(st[:0], r)
			for len(st) > 0 {
				e := st[len(st)-1]
				st = st[:len(st)-1]
				if e != r {
					b := det.blocks[e]
					d.block(true, b.parent, messages.StoredBlock{BlockHash: e, TokensHash: b.local}, b.tiers, nil)
				}
				n := len(st)
				st = append(st, det.kids[e]...)
				slices.SortFunc(st[n:], func(a, b messages.ExternalHash) int { return cmp.Compare(b, a) })
			}
		}
	}
	return append(d.out, d.extras...)
}
