package sessions

import (
	"sort"

	"github.com/kvrouter/kvrouter/messages"
)

// lineage is one session's blocks on one (worker, dp_rank) stream, in
// store order: per block its engine hash and its tiers (0: dead, waiting
// for compaction). A parent always precedes its children (a block is
// appended under a parent the lineage already holds), so one forward pass
// finds every descendant. The last block is always live, and it is the
// newest.
//
// Parents are not stored per block: the blocks are cut into runs, each a
// chain (every block of a run after its first is the child of the one
// before it), so only a run's first block has a parent of its own — an
// earlier position (a branch), or none (a segment start, with the hash it
// was stored under when the lineage did not hold it: its anchor). A
// session that keeps continuing its newest block is one run.
//
// Its stream's key is st.key, not a field, its time is 8 bytes
// (Index.clock) and its hashes and tiers share one slice: the record is
// 112 bytes, a size class of Go's allocator (the next field would make it
// 128).
type lineage struct {
	sess *session
	st   *stream
	// hashes holds the blocks' engine hashes; past tierAt, its backing
	// array holds their tiers, eight to a word (tier): one allocation and
	// one slice header for both lists.
	hashes []messages.ExternalHash
	runs   []run
	// id names the lineage in its stream's owner slots; base is the
	// absolute position of hashes[0] (the slots hold absolute positions,
	// so dropping a prefix for MaxDepth only moves base).
	id   uint32
	base uint32
	// depth is the newest block's: the blocks from it back to its
	// segment's first block (the only depth routing asks for).
	depth uint32
	live  int32
	dead  int32
	// dirtyFrom is the lowest position killed by the Removed event being
	// applied (-1: none).
	dirtyFrom int32
	tierAt    int32  // the index of the tiers' first word: room for this many hashes
	stamp     uint64 // Index.seq at the last append
	updated   int64  // now at the last append (Index.clock)
}

// run is a chain of consecutive positions from start to the next run's
// start: its first block's parent is parent (negative: a segment start,
// stored under anchor when parent is anchored), every other block's the
// one before it. 16 bytes: the anchor's presence is parent's, not a bool
// of its own (which would pad the run to 24).
type run struct {
	start, parent int32
	anchor        messages.ExternalHash
}

// A segment start's parent: without an anchor, or with one.
const (
	unanchored int32 = -1
	anchored   int32 = -2
)

// segmentStart returns the run of a segment start at start, anchored at
// the hash its first block was stored under when the lineage has one.
func segmentStart(start int32, anchor messages.ExternalHash, hasAnchor bool) run {
	if hasAnchor {
		return run{start: start, parent: anchored, anchor: anchor}
	}
	return run{start: start, parent: unanchored}
}

// hasAnchor reports whether r is a segment start stored under its anchor.
func (r *run) hasAnchor() bool { return r.parent == anchored }

// lookup is nil-safe: a session without a lineage on the stream holds
// nothing.
func (l *lineage) lookup(h messages.ExternalHash) (int32, bool) {
	if l == nil {
		return -1, false
	}
	return l.st.find(h, l.id)
}

// runOf returns the index of the run holding pos.
func (l *lineage) runOf(pos int32) int {
	n := len(l.runs)
	if l.runs[n-1].start <= pos { // the newest's run: nearly every call
		return n - 1
	}
	return sort.Search(n, func(i int) bool { return l.runs[i].start > pos }) - 1
}

// parent returns the position of pos's parent, negative for a segment
// start.
func (l *lineage) parent(pos int32) int32 {
	if r := &l.runs[l.runOf(pos)]; r.start == pos {
		return r.parent
	}
	return pos - 1
}

// parentHash returns the engine hash the block at pos was stored under.
func (l *lineage) parentHash(pos int32) (messages.ExternalHash, bool) {
	r := &l.runs[l.runOf(pos)]
	switch {
	case r.start != pos:
		return l.hashes[pos-1], true
	case r.parent >= 0:
		return l.hashes[r.parent], true
	}
	return r.anchor, r.hasAnchor()
}

// segment returns the run starting pos's segment (the run of the segment
// start its chain of parents ends at).
func (l *lineage) segment(pos int32) *run {
	r := &l.runs[l.runOf(pos)]
	for r.parent >= 0 {
		r = &l.runs[l.runOf(r.parent)]
	}
	return r
}

// isAncestor reports whether the block at a is d or one of d's ancestors.
func (l *lineage) isAncestor(a, d int32) bool {
	for p := d; p >= a; {
		r := &l.runs[l.runOf(p)]
		if r.start <= a {
			return true
		}
		p = r.parent
	}
	return false
}

// chainLen counts the blocks from pos back to its segment's first block.
func (l *lineage) chainLen(pos int32) uint32 {
	n := uint32(0)
	for p := pos; p >= 0; {
		r := &l.runs[l.runOf(p)]
		n += uint32(p - r.start + 1)
		p = r.parent
	}
	return n
}

// newest returns the newest block's hash (the lineage must not be empty).
func (l *lineage) newest() messages.ExternalHash { return l.hashes[len(l.hashes)-1] }

// tier returns the tiers of the block at pos.
func (l *lineage) tier(pos int32) uint8 {
	return uint8(l.hashes[:cap(l.hashes)][int(l.tierAt)+int(pos>>3)] >> (uint(pos&7) * 8))
}

// setTier sets the tiers of the block at pos.
func (l *lineage) setTier(pos int32, t uint8) {
	w := &l.hashes[:cap(l.hashes)][int(l.tierAt)+int(pos>>3)]
	shift := uint(pos&7) * 8
	*w = *w&^(0xff<<shift) | messages.ExternalHash(t)<<shift
}

// grow makes room for n more blocks when l has none left: n and an eighth
// of what it holds (append would double a short list, a third of its
// bytes unused on average). Hashes and tiers are moved to one new array:
// room for c hashes, then the tiers of c blocks in ⌈c/8⌉ words.
func (l *lineage) grow(n int) {
	if len(l.hashes) < int(l.tierAt) {
		return
	}
	c := len(l.hashes) + max(n, 1) + len(l.hashes)/8
	buf := make([]messages.ExternalHash, c+(c+7)/8)
	copy(buf, l.hashes)
	if len(l.hashes) > 0 {
		old := l.hashes[:cap(l.hashes)]
		copy(buf[c:], old[l.tierAt:int(l.tierAt)+(len(l.hashes)+7)/8])
	}
	l.hashes, l.tierAt = buf[:len(l.hashes)], int32(c)
}

// appendBlock appends h under the block at prevPos (-1: a new segment
// stored under prev when hasPrev) and returns its position. The caller
// made room (grow).
func (x *Index) appendBlock(l *lineage, h messages.ExternalHash, tier uint8, prevPos int32, prev messages.ExternalHash, hasPrev bool) int32 {
	l.st.reserve()
	pos := int32(len(l.hashes))
	depth := uint32(1)
	switch {
	case prevPos >= 0 && prevPos == pos-1: // under the newest: its run continues
		depth = l.depth + 1
	case prevPos >= 0:
		depth = l.chainLen(prevPos) + 1
		l.runs = append(l.runs, run{start: pos, parent: prevPos})
	default:
		l.runs = append(l.runs, segmentStart(pos, prev, hasPrev))
	}
	l.hashes = append(l.hashes, h) // in place: below tierAt
	l.setTier(pos, tier)
	l.depth = depth
	l.live++
	x.blocks++
	l.st.own(h, l, pos)
	return pos
}

// kill marks the block at pos dead (its tiers already cleared or not) and
// forgets its hash.
func (x *Index) kill(l *lineage, pos int32) {
	l.setTier(pos, 0)
	l.st.unown(l.hashes[pos], l, pos)
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
	ri := l.runOf(from)
	for i := from + 1; i < int32(len(l.hashes)); i++ {
		for ri+1 < len(l.runs) && l.runs[ri+1].start <= i {
			ri++
		}
		p := i - 1
		if l.runs[ri].start == i {
			p = l.runs[ri].parent
		}
		if l.tier(i) != 0 && p >= 0 && l.tier(p) == 0 {
			x.kill(l, i)
			x.count(ReasonPruned, 1)
		}
	}
	tail := len(l.hashes)
	n := tail
	for n > 0 && l.tier(int32(n-1)) == 0 {
		n--
		l.dead--
	}
	l.hashes = l.hashes[:n]
	for len(l.runs) > 0 && l.runs[len(l.runs)-1].start >= int32(n) {
		l.runs = l.runs[:len(l.runs)-1]
	}
	if n < tail && n > 0 { // the newest went: the last live block is
		l.depth = l.chainLen(int32(n - 1))
	}
	switch {
	case l.live == 0:
		x.dropLineage(l, true)
	case 2*int(l.dead) > len(l.hashes):
		x.compact(l, 0)
	}
}

// trim drops the n oldest live blocks of l (MaxDepth). Their children
// start new segments, anchored at the dropped parent's hash.
func (x *Index) trim(l *lineage, n int) {
	keep := 0
	for seen := 0; keep < len(l.hashes) && seen < n; keep++ {
		if l.tier(int32(keep)) != 0 {
			seen++
		}
	}
	x.compact(l, keep)
}

// compact drops the blocks before position keep (live ones are counted as
// depth_dropped) and every dead block, and rebuilds the runs and the
// newest's depth. Blocks that keep their absolute position keep their
// slot, so a trim of a lineage without dead blocks rewrites no slot.
func (x *Index) compact(l *lineage, keep int) {
	k := int32(keep)
	// The dropped prefix first, while every hash is still in place: its
	// slots go, and the runs whose first parent it held (or that it cuts)
	// become segments anchored at that parent.
	for i := int32(0); i < k; i++ {
		if l.tier(i) != 0 {
			l.st.unown(l.hashes[i], l, i)
			l.live--
			x.blocks--
			x.count(ReasonDepthDropped, 1)
		}
	}
	runs := l.runs[:0]
	for i, r := range l.runs {
		end := int32(len(l.hashes))
		if i+1 < len(l.runs) {
			end = l.runs[i+1].start
		}
		switch {
		case end <= k:
			continue
		case r.start < k: // cut: its block at keep loses its parent
			r = segmentStart(k, l.hashes[k-1], true)
		case r.parent >= 0 && r.parent < k:
			r = segmentStart(r.start, l.hashes[r.parent], true)
		}
		runs = append(runs, r)
	}
	l.runs = runs
	if cap(x.remap) < len(l.hashes) {
		x.remap = make([]int32, len(l.hashes))
	}
	remap := x.remap[:len(l.hashes)]
	oldBase := l.base
	l.base += uint32(keep) // before the slots of moved blocks are rewritten
	w, ri, nr := int32(0), 0, 0
	for i := k; i < int32(len(l.hashes)); i++ {
		for ri+1 < len(runs) && runs[ri+1].start <= i {
			ri++
		}
		t := l.tier(i)
		if t == 0 {
			remap[i] = -1
			continue
		}
		r := runs[ri]
		p := i - 1 // a live block's parent is live
		if r.start == i {
			p = r.parent
		}
		switch {
		case p >= 0 && remap[p] == w-1 && nr > 0: // the chain goes on
		case p >= 0:
			runs[nr] = run{start: w, parent: remap[p]}
			nr++
		default:
			r.start = w
			runs[nr] = r
			nr++
		}
		h := l.hashes[i]
		l.hashes[w] = h
		l.setTier(w, t)
		if w != i-k { // a dead block before it went: its absolute position moves
			l.st.reown(h, l, (oldBase+uint32(i))&posMask, w)
		}
		remap[i] = w
		w++
	}
	l.hashes, l.runs = l.hashes[:w], runs[:nr]
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
		if l.st.key == key {
			return l
		}
	}
	return nil
}
