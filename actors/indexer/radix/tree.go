package radix

import (
	"cmp"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Defaults for Config's zero values.
const (
	DefaultSetBits = 32
	// DumpMaxBlocks bounds the blocks of every event Dump emits, like the
	// coalescer's MaxBlocks.
	DumpMaxBlocks = 128
)

const (
	kidsMapMin  = 32 // a node switches from sorted child slices to a map above this many children
	kidsListMax = 8  // … and back at or below this many
	maxStreams  = 1 << 28
	// The node arena grows a chunk of 2^chunkBits nodes (32 KiB) at a time:
	// no copy of the nodes held, and at most one chunk unused.
	chunkBits = 10
	chunkMask = 1<<chunkBits - 1
)

// Config sets a Tree's representation thresholds; the zero value is fine.
type Config struct {
	// SetBits: a block's set of streams switches from a sorted id list to
	// per-tier bitsets when it holds more than SetBits streams and one
	// bitset is no larger than the list, and back when it falls to
	// SetBits/2 or the bitsets grow much larger than a list would be. 0
	// means DefaultSetBits.
	SetBits int
	// ExpectedBlocks preallocates room for that many tree blocks.
	ExpectedBlocks int
}

// Tree is the radix index of one namespace (model, tenant): a tree of local
// block hashes whose nodes record which streams (worker, dp_rank) hold the
// block and on which tiers, plus each stream's engine-hash lookup. It is a
// plain value: not safe for concurrent use while Apply runs; FindMatches only
// reads it, so several goroutines may query it at once with their own
// Overlap values.
type Tree struct {
	cfg    Config
	chunks []*[1 << chunkBits]node // the node arena; node 0 is the root
	n      uint32                  // nodes allocated from the arena, root included
	freeN  uint32                  // head of the free node list (linked through child), 0: empty
	free   int                     // nodes on the free list

	sets  []wset // worker sets of blocks held by ≥ 2 streams; sets[0] unused
	freeS []uint32
	kids  []kidSet // children of blocks with ≥ 2 children; kids[0] unused
	freeK []uint32

	streams map[messages.WorkerKey]*stream
	byID    []*stream            // interned id → stream; nil when free
	keys    []messages.WorkerKey // interned id → key (dense, for FindMatches)
	freeIDs []uint32

	entries int // (block, stream) pairs in the tree
	stats   Stats
	touched messages.ExternalHash // keeps store's warming loads (hashtab.Map.Touch)
	stack   []uint32              // scratch for walks
	visited []uint32
}

// node is one block of the tree (32 bytes, no pointers: the arena is not
// scanned by the garbage collector).
type node struct {
	hash   messages.LocalHash
	parent uint32
	child  uint32 // the only child when kids == 0; the next free node while free
	kids   uint32 // index in Tree.kids when the node has ≥ 2 children
	gen    uint32 // bumped when the node is freed: stale lookups notice
	// ent is the only entry (id<<4 | tier bits) when n == 1, the index of
	// the block's set in Tree.sets when n ≥ 2.
	ent uint32
	n   uint32 // streams holding the block
}

// kidSet holds the children of a node with ≥ 2 children: sorted parallel
// slices while few, a map when many.
type kidSet struct {
	hashes []messages.LocalHash
	idx    []uint32
	m      map[messages.LocalHash]uint32
}

// New returns an empty tree.
func New(cfg Config) *Tree {
	if cfg.SetBits <= 0 {
		cfg.SetBits = DefaultSetBits
	}
	t := &Tree{
		cfg:     cfg,
		n:       1,
		sets:    make([]wset, 1),
		kids:    make([]kidSet, 1),
		streams: map[messages.WorkerKey]*stream{},
	}
	for range 1 + max(cfg.ExpectedBlocks, 0)>>chunkBits {
		t.chunks = append(t.chunks, new([1 << chunkBits]node))
	}
	return t
}

// Stats returns the counters.
func (t *Tree) Stats() Stats { return t.stats }

// newNode returns a fresh node under parent.
func (t *Tree) newNode(parent uint32, h messages.LocalHash) uint32 {
	if x := t.freeN; x != 0 {
		nd := t.node(x)
		t.freeN = nd.child
		t.free--
		*nd = node{hash: h, parent: parent, gen: nd.gen}
		return x
	}
	x := t.n
	if x>>chunkBits == uint32(len(t.chunks)) {
		t.chunks = append(t.chunks, new([1 << chunkBits]node))
	}
	t.n++
	*t.node(x) = node{hash: h, parent: parent}
	return x
}

// node returns node x of the arena (x < t.n).
func (t *Tree) node(x uint32) *node { return &t.chunks[x>>chunkBits][x&chunkMask] }

// findChild returns the child of x with local hash h, or 0.
func (t *Tree) findChild(x uint32, h messages.LocalHash) uint32 {
	nd := t.node(x)
	if nd.kids == 0 {
		if c := nd.child; c != 0 && t.node(c).hash == h {
			return c
		}
		return 0
	}
	ks := &t.kids[nd.kids]
	if ks.m != nil {
		return ks.m[h]
	}
	if i, ok := slices.BinarySearch(ks.hashes, h); ok {
		return ks.idx[i]
	}
	return 0
}

// child returns the child of x with local hash h, creating it.
func (t *Tree) child(x uint32, h messages.LocalHash) uint32 {
	if c := t.findChild(x, h); c != 0 {
		return c
	}
	c := t.newNode(x, h)
	nd := t.node(x)
	switch {
	case nd.child == 0 && nd.kids == 0:
		nd.child = c
	case nd.kids == 0:
		k := t.newKids()
		ks := &t.kids[k]
		a, b := nd.child, c
		if t.node(a).hash > h {
			a, b = b, a
		}
		ks.hashes = append(ks.hashes, t.node(a).hash, t.node(b).hash)
		ks.idx = append(ks.idx, a, b)
		nd.child, nd.kids = 0, k
	default:
		ks := &t.kids[nd.kids]
		if ks.m != nil {
			ks.m[h] = c
			break
		}
		i, _ := slices.BinarySearch(ks.hashes, h)
		ks.hashes = slices.Insert(ks.hashes, i, h)
		ks.idx = slices.Insert(ks.idx, i, c)
		if len(ks.hashes) > kidsMapMin {
			ks.m = make(map[messages.LocalHash]uint32, len(ks.hashes))
			for j, kh := range ks.hashes {
				ks.m[kh] = ks.idx[j]
			}
			ks.hashes, ks.idx = nil, nil
		}
	}
	return c
}

func (t *Tree) newKids() uint32 {
	if n := len(t.freeK); n > 0 {
		k := t.freeK[n-1]
		t.freeK = t.freeK[:n-1]
		return k
	}
	t.kids = append(t.kids, kidSet{})
	return uint32(len(t.kids) - 1)
}

// unlink removes child c from x.
func (t *Tree) unlink(x, c uint32) {
	nd := t.node(x)
	if nd.kids == 0 {
		if nd.child == c {
			nd.child = 0
		}
		return
	}
	ks := &t.kids[nd.kids]
	h := t.node(c).hash
	if ks.m != nil {
		delete(ks.m, h)
		if len(ks.m) > kidsListMax {
			return
		}
		for kh, ki := range ks.m {
			ks.hashes = append(ks.hashes, kh)
			ks.idx = append(ks.idx, ki)
		}
		ks.m = nil
		sortKids(ks)
	} else if i, ok := slices.BinarySearch(ks.hashes, h); ok {
		ks.hashes = slices.Delete(ks.hashes, i, i+1)
		ks.idx = slices.Delete(ks.idx, i, i+1)
	}
	if len(ks.hashes) == 1 {
		nd.child = ks.idx[0]
		t.kids[nd.kids] = kidSet{}
		t.freeK = append(t.freeK, nd.kids)
		nd.kids = 0
	}
}

func sortKids(ks *kidSet) {
	type kv struct {
		h messages.LocalHash
		i uint32
	}
	tmp := make([]kv, len(ks.hashes))
	for j := range tmp {
		tmp[j] = kv{ks.hashes[j], ks.idx[j]}
	}
	slices.SortFunc(tmp, func(a, b kv) int { return cmp.Compare(a.h, b.h) })
	for j, e := range tmp {
		ks.hashes[j], ks.idx[j] = e.h, e.i
	}
}

// appendChildren appends x's children to buf.
func (t *Tree) appendChildren(buf []uint32, x uint32) []uint32 {
	nd := t.node(x)
	if nd.kids == 0 {
		if nd.child != 0 {
			buf = append(buf, nd.child)
		}
		return buf
	}
	ks := &t.kids[nd.kids]
	if ks.m != nil {
		for _, c := range ks.m {
			buf = append(buf, c)
		}
		return buf
	}
	return append(buf, ks.idx...)
}

// tryFree frees x and then its ancestors while they are held by no stream
// and have no children.
func (t *Tree) tryFree(x uint32) {
	for x != 0 {
		nd := t.node(x)
		if nd.n != 0 || nd.child != 0 || nd.kids != 0 || nd.parent == x {
			return
		}
		p := nd.parent
		t.unlink(p, x)
		*nd = node{gen: nd.gen + 1, child: t.freeN, parent: x} // parent == x marks a free node
		t.freeN = x
		t.free++
		x = p
	}
}
