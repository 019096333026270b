package radix

import (
	"github.com/kvrouter/kvrouter/actors/internal/hashtab"
	"github.com/kvrouter/kvrouter/messages"
)

// stream is the state of one (worker, dp_rank).
type stream struct {
	key  messages.WorkerKey
	id   uint32 // interned: the stream's entry in worker sets
	last uint64 // last applied event id (0: none yet)
	// lookup maps the stream's engine hashes of tree blocks to their node
	// (low 32 bits) and the node's generation (high 32 bits). A cascade does
	// not know its descendants' engine hashes, so it leaves their entries
	// behind; resolve drops such stale entries when it meets them and sweep
	// drops them all once they are half the table.
	lookup hashtab.Map[messages.ExternalHash, uint64]
	size   int // tree blocks held
	stale  int // lookup entries left behind by cascades (an upper bound)
	det    *detached
}

func pack(x, gen uint32) uint64 { return uint64(gen)<<32 | uint64(x) }

// resolve returns the tree block the stream holds under engine hash e.
func (t *Tree) resolve(s *stream, e messages.ExternalHash) (uint32, bool) {
	v, ok := s.lookup.Get(e)
	if !ok {
		return 0, false
	}
	if t.valid(s, v) {
		return uint32(v), true
	}
	s.lookup.Delete(e)
	if s.stale > 0 {
		s.stale--
	}
	return 0, false
}

func (t *Tree) valid(s *stream, v uint64) bool {
	x := uint32(v)
	return x < t.n && t.node(x).gen == uint32(v>>32) && t.bitsOf(x, s.id) != 0
}

func (t *Tree) sweep(s *stream) {
	s.lookup.DeleteFunc(func(_ messages.ExternalHash, v uint64) bool { return !t.valid(s, v) })
	s.stale = 0
}

// Apply applies one event to its (worker, dp_rank) stream and says what
// happened. Event ids follow actors/coalescer's numbering (dense per stream,
// from 1; actors/indexer/README.md, "Event ids"): id last+1 applies; an id
// at or below the last is stale and ignored; a larger one applies and counts
// a gap; id 0 applies without moving the position (dumps, bootstrap).
func (t *Tree) Apply(ev messages.RouterEvent) Outcome {
	t.stats.Events++
	var o Outcome
	key := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	s := t.streams[key]
	id := ev.Event.EventID
	if s != nil && id != 0 && id <= s.last {
		t.note(&o, ReasonStale, 1)
		return o
	}
	if s == nil {
		if s = t.newStream(key); s == nil {
			t.note(&o, ReasonInvalid, 1)
			return o
		}
	}
	switch {
	case id == 0:
		t.note(&o, ReasonUnsequenced, 1)
	case id > s.last+1:
		t.note(&o, ReasonIDGap, 1)
	}
	if id != 0 {
		s.last = id
	}
	tier := ev.StorageTier
	switch {
	case ev.Event.Kind == messages.KindCleared:
		t.clearStream(s)
	case tier > messages.TierExternal:
		t.note(&o, ReasonInvalid, 1)
		return o
	case ev.Event.Kind == messages.KindStored:
		t.store(s, &ev.Event, uint8(1)<<tier, &o)
	case ev.Event.Kind == messages.KindRemoved:
		t.remove(s, ev.Event.Removed, uint8(1)<<tier, &o)
	case ev.Event.Kind == messages.KindOffloaded:
		t.placeholders(s, uint8(1)<<tier, ev.Event.Offloaded, &o)
	default:
		t.note(&o, ReasonInvalid, 1)
		return o
	}
	o.Applied = true
	return o
}

func (t *Tree) newStream(key messages.WorkerKey) *stream {
	var id uint32
	if n := len(t.freeIDs); n > 0 {
		id = t.freeIDs[n-1]
		t.freeIDs = t.freeIDs[:n-1]
	} else {
		if len(t.byID) >= maxStreams {
			return nil
		}
		id = uint32(len(t.byID))
		t.byID = append(t.byID, nil)
		t.keys = append(t.keys, key)
	}
	t.keys[id] = key
	s := &stream{key: key, id: id}
	t.byID[id] = s
	t.streams[key] = s
	return s
}

// store attaches a chain under its parent's block (the root without
// parent), or keeps it detached when the parent is not a tree block of the
// stream. A block the stream already holds keeps its place and gains the
// tier.
func (t *Tree) store(s *stream, ev *messages.KvCacheEvent, bit uint8, o *Outcome) {
	var cur uint32 // current attached parent (0: root)
	det, parent := false, messages.ExternalHash(0)
	if ev.HasParent {
		if x, ok := t.resolve(s, ev.ParentHash); ok {
			cur = x
		} else {
			det, parent = true, ev.ParentHash
			if s.det.has(parent) {
				t.note(o, ReasonDetachedParent, 1)
			} else {
				t.note(o, ReasonParentNotFound, 1)
			}
		}
	}
	var touched messages.ExternalHash
	for _, b := range ev.Blocks {
		touched ^= s.lookup.Touch(b.BlockHash)
	}
	t.touched ^= touched
	for _, b := range ev.Blocks {
		e := b.BlockHash
		if !det && s.det == nil {
			// The common case, attached and nothing detached: the
			// engine hash's lookup and, for a new block, its insert in
			// one probe.
			v, added := s.lookup.Upsert(e)
			if !added {
				if t.valid(s, *v) {
					x := uint32(*v)
					t.put(x, s.id, t.bitsOf(x, s.id)|bit)
					t.note(o, ReasonDuplicateStore, 1)
					cur = x
					continue
				}
				if s.stale > 0 { // a stale entry, replaced below (resolve's drop)
					s.stale--
				}
			}
			c := t.child(cur, b.TokensHash)
			t.holdAt(s, c, v, bit, o)
			cur = c
			continue
		}
		if x, ok := t.resolve(s, e); ok {
			t.put(x, s.id, t.bitsOf(x, s.id)|bit)
			t.note(o, ReasonDuplicateStore, 1)
			cur, det = x, false
			continue
		}
		if s.det.has(e) {
			s.det.addTier(e, bit)
			t.note(o, ReasonDuplicateStore, 1)
			det, parent = true, e
			continue
		}
		if det {
			if !s.detach(e, b.TokensHash, parent, bit) {
				t.note(o, ReasonInvalid, 1) // a cycle of engine hashes: the rest is dropped
				return
			}
			parent = e
			continue
		}
		c := t.child(cur, b.TokensHash)
		t.hold(s, c, e, bit, o)
		if s.det != nil {
			t.graft(s, e, c, o)
		}
		cur = c
	}
}

// hold records that the stream holds tree block c under engine hash e, on
// the tiers in bits.
func (t *Tree) hold(s *stream, c uint32, e messages.ExternalHash, bits uint8, o *Outcome) {
	v, _ := s.lookup.Upsert(e)
	t.holdAt(s, c, v, bits, o)
}

// holdAt is hold with the engine hash's lookup value already found (v, from
// Upsert; the lookup must not change before holdAt sets it).
func (t *Tree) holdAt(s *stream, c uint32, v *uint64, bits uint8, o *Outcome) {
	old := t.bitsOf(c, s.id)
	if old != 0 {
		t.note(o, ReasonAliasedBlock, 1)
	} else {
		s.size++
	}
	t.put(c, s.id, old|bits)
	*v = pack(c, t.node(c).gen)
}

// remove drops each hash's tier; a block left on no tier is dropped with
// the stream's blocks below it.
func (t *Tree) remove(s *stream, hashes []messages.ExternalHash, bit uint8, o *Outcome) {
	for _, e := range hashes {
		if x, ok := t.resolve(s, e); ok {
			b := t.bitsOf(x, s.id)
			switch {
			case b&bit == 0:
				t.note(o, ReasonTierNotHeld, 1)
			case b != bit:
				t.put(x, s.id, b&^bit)
			default:
				s.lookup.Delete(e)
				t.note(o, ReasonCascaded, t.dropSubtree(s, x)-1)
			}
			continue
		}
		if s.det.has(e) {
			switch b := s.det.blocks[e].tiers; {
			case b&bit == 0:
				t.note(o, ReasonTierNotHeld, 1)
			case b != bit:
				s.det.setTiers(e, b&^bit)
			default:
				t.note(o, ReasonCascaded, s.dropDetached(e)-1)
			}
			continue
		}
		t.note(o, ReasonUnknownRemoved, 1)
	}
}

// dropSubtree drops the stream from block x and every block below it that
// the stream holds (they cannot be used without their prefix), freeing
// blocks no stream holds. It returns the number of blocks dropped.
func (t *Tree) dropSubtree(s *stream, x uint32) int {
	stack, visited := append(t.stack[:0], x), t.visited[:0]
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !t.del(y, s.id) {
			continue
		}
		visited = append(visited, y)
		mark := len(stack)
		stack = t.appendChildren(stack, y)
		kept := stack[:mark]
		for _, c := range stack[mark:] {
			if t.bitsOf(c, s.id) != 0 {
				kept = append(kept, c)
			}
		}
		stack = kept
	}
	n := len(visited)
	for i := n - 1; i >= 0; i-- {
		t.tryFree(visited[i])
	}
	t.stack, t.visited = stack[:0], visited[:0]
	s.size -= n
	s.stale += n - 1
	if s.stale > 64 && 2*s.stale > s.lookup.Len() {
		t.sweep(s)
	}
	return n
}

// clearStream drops every block of the stream; its id position stays.
func (t *Tree) clearStream(s *stream) {
	visited := t.visited[:0]
	for _, v := range s.lookup.All() {
		if x := uint32(v); x < t.n && t.node(x).gen == uint32(v>>32) && t.del(x, s.id) {
			visited = append(visited, x)
		}
	}
	for _, x := range visited {
		t.tryFree(x)
	}
	t.visited = visited[:0]
	s.lookup = hashtab.Map[messages.ExternalHash, uint64]{}
	s.size, s.stale, s.det = 0, 0, nil
}

// Reset forgets a (worker, dp_rank) entirely: its blocks and its event-id
// position (the next event starts a new sequence). The stream actor uses it
// when its coalescer state was lost (RouterEventBatch.Clear).
func (t *Tree) Reset(key messages.WorkerKey) {
	if s := t.streams[key]; s != nil {
		t.clearStream(s)
		delete(t.streams, key)
		t.byID[s.id] = nil
		t.freeIDs = append(t.freeIDs, s.id)
	}
}

// RemoveWorker forgets every dp rank of a worker (Reset on each).
func (t *Tree) RemoveWorker(w messages.WorkerID) {
	for _, k := range t.Workers() {
		if k.Worker == w {
			t.Reset(k)
		}
	}
}

// ApplyPlaceholder records a storage-tier store that carried no tokens (the
// normalizer rejects those as no_tokens: vLLM's CPU-offload placeholders).
// Without tokens there is no local hash, so a block can only be placed if
// the stream already holds its engine hash on another tier: that block
// gains the tier. Others are counted as unresolved and dropped. It returns
// both counts. Placeholders carry no event id; the caller applies them in
// stream order.
func (t *Tree) ApplyPlaceholder(key messages.WorkerKey, tier messages.StorageTier, hashes []messages.ExternalHash) (resolved, unresolved int) {
	s := t.streams[key]
	if s == nil || tier > messages.TierExternal {
		t.note(nil, ReasonPlaceholderUnresolved, len(hashes))
		return 0, len(hashes)
	}
	return t.placeholders(s, uint8(1)<<tier, hashes, nil)
}

// placeholders gives tier bit to each of the stream's blocks named in
// hashes; unknown ones are counted and dropped (see ApplyPlaceholder).
func (t *Tree) placeholders(s *stream, bit uint8, hashes []messages.ExternalHash, o *Outcome) (resolved, unresolved int) {
	for _, e := range hashes {
		if x, ok := t.resolve(s, e); ok {
			t.put(x, s.id, t.bitsOf(x, s.id)|bit)
			resolved++
		} else if s.det.has(e) {
			s.det.addTier(e, bit)
			resolved++
		} else {
			unresolved++
		}
	}
	t.note(o, ReasonPlaceholderResolved, resolved)
	t.note(o, ReasonPlaceholderUnresolved, unresolved)
	return resolved, unresolved
}
