package sessions

import (
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// blk is one block of a lineage. Pointer-free, so the garbage collector does
// not scan lineage slices.
type blk struct {
	hash messages.ExternalHash
	// anchor is the engine hash the block's segment was stored under when
	// the lineage did not hold it (hasAnchor); a segment stored without a
	// parent has none. For a segment's first block it is its own parent.
	anchor messages.ExternalHash
	// up is the distance back to the block's parent (pos − parent's pos);
	// 0 for a segment's first block. Relative, so dropping a prefix of the
	// lineage moves no parent.
	up        uint32
	tiers     uint8
	hasAnchor bool
	dead      bool
}

// lineage is one session's blocks on one (worker, dp_rank) stream, in
// store order. A parent always precedes its children (a block is appended
// under a parent the lineage already holds), so one forward pass finds every
// descendant. Dead blocks wait for compaction; the last block is always
// live, and it is the newest.
type lineage struct {
	key    messages.WorkerKey
	sess   *session
	st     *stream
	blocks []blk
	// id names the lineage in its stream's refs; base is the absolute
	// position of blocks[0] (the refs hold absolute positions, so dropping
	// a prefix for MaxDepth only moves base).
	id   uint32
	base uint64
	// depth is the newest block's: the blocks from it back to its
	// segment's first block (the only depth routing asks for, so blocks do
	// not carry one).
	depth   uint32
	live    int
	dead    int
	stamp   uint64    // Index.seq at the last append
	updated time.Time // now at the last append
	// dirtyFrom is the lowest position killed by the Removed event being
	// applied (-1: none).
	dirtyFrom int32
}

// lookup is nil-safe: a session without a lineage on the stream holds
// nothing.
func (l *lineage) lookup(h messages.ExternalHash) (int32, bool) {
	if l == nil {
		return -1, false
	}
	return l.st.find(h, l.id)
}

// parent returns the position of pos's parent, -1 for a segment start.
func (l *lineage) parent(pos int32) int32 {
	if u := l.blocks[pos].up; u > 0 {
		return pos - int32(u)
	}
	return -1
}

// parentHash returns the engine hash the block at pos was stored under.
func (l *lineage) parentHash(pos int32) (messages.ExternalHash, bool) {
	if p := l.parent(pos); p >= 0 {
		return l.blocks[p].hash, true
	}
	b := &l.blocks[pos]
	return b.anchor, b.hasAnchor
}

// isAncestor reports whether the block at a is d or one of d's ancestors.
func (l *lineage) isAncestor(a, d int32) bool {
	for p := d; p >= 0; p = l.parent(p) {
		if p == a {
			return true
		}
	}
	return false
}

// newest returns the newest block (the lineage must not be empty).
func (l *lineage) newest() *blk { return &l.blocks[len(l.blocks)-1] }

// chainLen counts the blocks from pos back to its segment's first block.
func (l *lineage) chainLen(pos int32) uint32 {
	n := uint32(0)
	for p := pos; p >= 0; p = l.parent(p) {
		n++
	}
	return n
}

// appendBlock appends h under the block at prevPos (-1: a new segment whose
// parent is prev when hasPrev) and returns its position.
func (x *Index) appendBlock(l *lineage, h messages.ExternalHash, tier uint8, prevPos int32, prev messages.ExternalHash, hasPrev bool) int32 {
	pos := int32(len(l.blocks))
	b := blk{hash: h, tiers: tier, anchor: prev, hasAnchor: hasPrev}
	depth := uint32(1)
	if prevPos >= 0 {
		p := &l.blocks[prevPos]
		b.up, b.anchor, b.hasAnchor = uint32(pos-prevPos), p.anchor, p.hasAnchor
		if prevPos == pos-1 { // under the newest: a chain continues
			depth = l.depth + 1
		} else {
			depth = l.chainLen(prevPos) + 1
		}
	}
	l.blocks = append(l.blocks, b)
	l.depth = depth
	l.live++
	x.blocks++
	l.st.own(h, l, pos)
	return pos
}

// kill marks the block at pos dead and forgets its hash.
func (x *Index) kill(l *lineage, pos int32) {
	b := &l.blocks[pos]
	b.dead = true
	l.st.unown(b.hash, l)
	l.live--
	l.dead++
	x.blocks--
}

// settle finishes a Removed event for l: kills the descendants of the
// blocks it killed, drops dead blocks off the end, and drops l when empty
// or compacts it when mostly dead.
func (x *Index) settle(l *lineage) {
	from := l.dirtyFrom
	l.dirtyFrom = -1
	for i := from + 1; i < int32(len(l.blocks)); i++ {
		if p := l.parent(i); !l.blocks[i].dead && p >= 0 && l.blocks[p].dead {
			x.kill(l, i)
			x.count(ReasonPruned, 1)
		}
	}
	tail := len(l.blocks)
	for n := len(l.blocks); n > 0 && l.blocks[n-1].dead; n-- {
		l.blocks = l.blocks[:n-1]
		l.dead--
	}
	if n := len(l.blocks); n < tail && n > 0 { // the newest went: the last live block is
		l.depth = l.chainLen(int32(n - 1))
	}
	switch {
	case l.live == 0:
		x.dropLineage(l, true)
	case 2*l.dead > len(l.blocks):
		x.compact(l, 0)
	}
}

// trim drops the n oldest live blocks of l (MaxDepth). Their children
// start new segments, anchored at the dropped parent's hash.
func (x *Index) trim(l *lineage, n int) {
	keep := 0
	for seen := 0; keep < len(l.blocks) && seen < n; keep++ {
		if !l.blocks[keep].dead {
			seen++
		}
	}
	x.compact(l, keep)
}

// compact drops the blocks before position keep (live ones are counted as
// depth_dropped) and every dead block, and recomputes anchors and the
// newest's depth.
// Blocks that keep their absolute position keep their ref, so a trim of a
// lineage without dead blocks rewrites no map entry.
func (x *Index) compact(l *lineage, keep int) {
	bs := l.blocks
	for i := range bs {
		b := &bs[i]
		switch {
		case b.dead:
		case i < keep:
			l.st.unown(b.hash, l)
			l.live--
			x.blocks--
			x.count(ReasonDepthDropped, 1)
		case b.up > 0 && i-int(b.up) < keep:
			// Orphaned by the trim: a new segment under the dropped hash.
			b.anchor, b.hasAnchor, b.up = bs[i-int(b.up)].hash, true, 0
		}
	}
	if cap(x.remap) < len(bs) {
		x.remap = make([]int32, len(bs))
	}
	remap := x.remap[:len(bs)]
	l.base += uint64(keep) // before the refs of moved blocks are rewritten
	w, moved := int32(0), false
	for i := range bs {
		b := bs[i]
		if b.dead || i < keep {
			moved = moved || i >= keep
			remap[i] = -1
			continue
		}
		if b.up > 0 {
			np := remap[i-int(b.up)]
			p := &bs[np]
			b.up, b.anchor, b.hasAnchor = uint32(w-np), p.anchor, p.hasAnchor
		}
		bs[w] = b
		if moved {
			l.st.reown(b.hash, l, w)
		}
		remap[i] = w
		w++
	}
	l.blocks = bs[:w]
	l.dead = 0
	if w > 0 {
		l.depth = l.chainLen(w - 1) // a trim may have cut the newest's segment
	}
}

// find returns s's lineage on key (nil: none).
func (s *session) find(key messages.WorkerKey) *lineage {
	if s == nil {
		return nil
	}
	for _, l := range s.lins {
		if l.key == key {
			return l
		}
	}
	return nil
}
