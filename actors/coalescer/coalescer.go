package coalescer

import (
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Defaults for Config's zero values.
const (
	DefaultMaxBlocks        = 128
	DefaultMaxTrackedBlocks = 1 << 20
)

// Config is one stream's coalescing settings.
type Config struct {
	// MaxBlocks bounds the blocks (Stored) or hashes (Removed) of every
	// emitted event; 0 means DefaultMaxBlocks. Larger inputs are split.
	MaxBlocks int
	// MaxTrackedBlocks bounds the reference-count table (engine hashes
	// stored on some tier and not yet removed); 0 means
	// DefaultMaxTrackedBlocks. New hashes stored while it is full are not
	// counted (Stats.Untracked) and their removes pass through.
	MaxTrackedBlocks int
}

// Stats counts what a Stream has seen since it was created.
type Stats struct {
	Pushed  uint64                     // events given to Push
	Emitted [messages.KindCount]uint64 // emitted events by messages.EventKind; their sum is the last event id
	Merged  uint64                     // inputs appended to the pending event instead of starting one

	SessionFlushes uint64 // pending events flushed because an event of another session followed
	CapFlushes     uint64 // pending events flushed because they reached MaxBlocks or a merge would pass it
	OwnerFlushes   uint64 // pending events emitted by Flush (timer, end of batch, shutdown)
	Split          uint64 // inputs over MaxBlocks, emitted in pieces

	FilteredHashes uint64 // removed hashes dropped because other stores of them are live
	DroppedRemoves uint64 // Removed events dropped entirely (every hash still referenced)
	DroppedEmpty   uint64 // Stored or Removed events without blocks, dropped
	Invalid        uint64 // events of another stream or of an unknown kind, dropped
	Untracked      uint64 // stores not counted: table full, count saturated, or unknown tier
	// UnknownParents counts stores whose parent the stream does not hold
	// (while every store was counted): the history before them is
	// incomplete — the engine kept blocks kvrouter never saw stored.
	UnknownParents uint64
}

// Stream is the coalescing state of one (worker, dp_rank) event stream: the
// pending event, the last event id, and the reference counts of stored
// engine hashes. It is not safe for concurrent use; its owner feeds it the
// stream's events in engine order.
type Stream struct {
	key        messages.WorkerKey
	maxBlocks  int
	maxTracked int

	lastID uint64
	pend   event // pend.kind == 0: nothing pending
	// startB and startR are the capacity the next pending Stored or
	// Removed event's buffer starts at (hold).
	startB, startR int
	refs           refTable
	scratch        []messages.ExternalHash
	stats          Stats
	touched        messages.ExternalHash // keeps Push's warming loads (hashtab.Map.Touch)
}

// event is one event's header and data: an input being added, a piece of a
// split input, or the pending event (whose slices are its own, and leave
// with it).
type event struct {
	kind      messages.EventKind
	tier      messages.StorageTier
	session   string
	hasParent bool
	parent    messages.ExternalHash
	blocks    []messages.StoredBlock
	removed   []messages.ExternalHash
	merged    bool // the pending event took a merge
}

func (e *event) size() int { return len(e.blocks) + len(e.removed) }

// take cuts the first n blocks or hashes off e and returns them as an event
// of their own; what remains of a Stored chain is parented on the piece's
// last block.
func (e *event) take(n int) event {
	piece := *e
	if e.kind == messages.KindStored {
		piece.blocks = e.blocks[:n]
		e.blocks = e.blocks[n:]
		e.hasParent, e.parent = true, piece.blocks[n-1].BlockHash
	} else {
		piece.removed = e.removed[:n]
		e.removed = e.removed[n:]
	}
	return piece
}

// New returns the coalescing state of the stream key.
func New(key messages.WorkerKey, cfg Config) *Stream {
	if cfg.MaxBlocks <= 0 {
		cfg.MaxBlocks = DefaultMaxBlocks
	}
	if cfg.MaxTrackedBlocks <= 0 {
		cfg.MaxTrackedBlocks = DefaultMaxTrackedBlocks
	}
	return &Stream{
		key:        key,
		maxBlocks:  cfg.MaxBlocks,
		maxTracked: cfg.MaxTrackedBlocks,
	}
}

// Key returns the stream the Stream coalesces.
func (s *Stream) Key() messages.WorkerKey { return s.key }

// Stats returns the counters so far.
func (s *Stream) Stats() Stats { return s.stats }

// LastEventID returns the id of the last emitted event (0 before the first).
func (s *Stream) LastEventID() uint64 { return s.lastID }

// Pending reports whether an event waits to be emitted (by a later Push or
// by Flush).
func (s *Stream) Pending() bool { return s.pend.kind != 0 }

// Push adds the stream's next event, in engine order, and appends to out
// whatever must be emitted now (possibly nothing: the event may stay
// pending, or be dropped). It does not retain ev's slices. Events of another
// stream (ev.Placement.Worker != Key()) are dropped and counted as Invalid.
func (s *Stream) Push(ev messages.PlacementEvent, out []messages.RouterEvent) []messages.RouterEvent {
	s.stats.Pushed++
	if ev.Placement.Worker != s.key {
		s.stats.Invalid++
		return out
	}
	in := event{kind: ev.Event.Kind, tier: ev.Placement.Tier, session: ev.SessionID}
	switch ev.Event.Kind {
	case messages.KindStored:
		if len(ev.Event.Blocks) == 0 {
			s.stats.DroppedEmpty++
			return out
		}
		if ev.Event.HasParent && !s.refs.holds(ev.Event.ParentHash) && s.stats.Untracked == 0 {
			s.stats.UnknownParents++
		}
		var touched messages.ExternalHash
		for _, b := range ev.Event.Blocks {
			touched ^= s.refs.once.Touch(b.BlockHash)
		}
		s.touched ^= touched
		for _, b := range ev.Event.Blocks {
			s.ref(in.tier, b.BlockHash)
		}
		in.blocks = ev.Event.Blocks
		if ev.Event.HasParent {
			in.hasParent, in.parent = true, ev.Event.ParentHash
		}
	case messages.KindRemoved:
		if len(ev.Event.Removed) == 0 {
			s.stats.DroppedEmpty++
			return out
		}
		// Nearly every remove passes whole: in takes ev's hashes (add
		// copies what it keeps), and only a remove that loses a hash
		// builds the ones kept in the scratch buffer.
		kept, filtered := ev.Event.Removed, false
		for i, h := range ev.Event.Removed {
			switch pass := s.unref(in.tier, h); {
			case !pass && !filtered:
				kept, filtered = append(s.scratch[:0], ev.Event.Removed[:i]...), true
			case pass && filtered:
				kept = append(kept, h)
			}
		}
		if filtered {
			s.stats.FilteredHashes += uint64(len(ev.Event.Removed) - len(kept))
			s.scratch = kept[:0]
			if cap(s.scratch) > maxScratch {
				s.scratch = nil // a huge remove does not pin its buffer
			}
		}
		if len(kept) == 0 {
			s.stats.DroppedRemoves++
			return out
		}
		in.removed = kept
	case messages.KindCleared:
		out = s.flush(out)
		s.refs = refTable{} // frees the table, unlike clear()
		return s.emit(out, in)
	case messages.KindOffloaded:
		if len(ev.Event.Offloaded) == 0 {
			s.stats.DroppedEmpty++
			return out
		}
		for _, h := range ev.Event.Offloaded {
			s.ref(in.tier, h) // its remove on that tier must pass later
		}
		in.removed = ev.Event.Offloaded
		return s.emit(s.flush(out), in.copied()) // alone, in order, without an id
	default:
		s.stats.Invalid++
		return out
	}
	return s.add(out, &in)
}

// maxScratch is the largest remove-filter buffer a Stream keeps between
// events (only a stream whose removes were filtered has one).
const maxScratch = 4096

// Flush appends the pending event, if any, to out.
func (s *Stream) Flush(out []messages.RouterEvent) []messages.RouterEvent {
	if s.pend.kind != 0 {
		s.stats.OwnerFlushes++
	}
	return s.flush(out)
}

// add merges in into the pending event or makes it the pending one,
// emitting what the rules require.
func (s *Stream) add(out []messages.RouterEvent, in *event) []messages.RouterEvent {
	p := &s.pend
	if p.kind != 0 {
		if s.continues(in) {
			if p.size()+in.size() <= s.maxBlocks {
				p.blocks = append(room(p.blocks, len(in.blocks), s.maxBlocks), in.blocks...)
				p.removed = append(room(p.removed, len(in.removed), s.maxBlocks), in.removed...)
				p.merged = true
				s.stats.Merged++
				if p.size() == s.maxBlocks {
					s.stats.CapFlushes++
					out = s.flush(out)
				}
				return out
			}
			s.stats.CapFlushes++
		} else if p.session != in.session {
			s.stats.SessionFlushes++
		}
		out = s.flush(out)
	}
	if in.size() > s.maxBlocks {
		s.stats.Split++
		for in.size() > s.maxBlocks {
			out = s.emit(out, in.take(s.maxBlocks).copied())
		}
	}
	s.hold(in)
	if p.size() == s.maxBlocks {
		s.stats.CapFlushes++
		out = s.flush(out)
	}
	return out
}

// continues reports whether in may merge into the (non-empty) pending event.
func (s *Stream) continues(in *event) bool {
	p := &s.pend
	if p.kind != in.kind || p.tier != in.tier || p.session != in.session {
		return false
	}
	switch in.kind {
	case messages.KindStored:
		return in.hasParent && in.parent == p.blocks[len(p.blocks)-1].BlockHash
	case messages.KindRemoved:
		return true
	}
	return false
}

// hold makes in the pending event, copying its data into a buffer of the
// pending event's own, which leaves with it (flush). While the pending
// events of its kind take merges (those tend to follow each other: a
// prefill reported in chunks, evictions one block at a time), a buffer
// starts at the largest size they reached; after one that took none, at
// in's size. So merges rarely grow a buffer step by step, and an event that
// takes none leaves at about its size.
func (s *Stream) hold(in *event) {
	p := &s.pend
	*p = *in
	p.blocks = append(buffer[messages.StoredBlock](len(in.blocks), s.startB, s.maxBlocks), in.blocks...)
	p.removed = append(buffer[messages.ExternalHash](len(in.removed), s.startR, s.maxBlocks), in.removed...)
}

// buffer returns an empty buffer of capacity max(n, start) at most limit
// (MaxBlocks, the most a pending event holds), nil when n is 0.
func buffer[T any](n, start, limit int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, 0, max(n, min(start, limit)))
}

// room returns buf with room for n more elements, doubling it when full
// (never past limit).
func room[T any](buf []T, n, limit int) []T {
	need := len(buf) + n
	if need <= cap(buf) {
		return buf
	}
	grown := make([]T, len(buf), max(need, min(2*cap(buf), limit)))
	copy(grown, buf)
	return grown
}

// flush emits the pending event, if any, with its buffers: the Stream keeps
// none, so a stream between engine batches (its owner flushes at the end of
// each) holds no event data.
func (s *Stream) flush(out []messages.RouterEvent) []messages.RouterEvent {
	p := &s.pend
	if p.kind == 0 {
		return out
	}
	start := &s.startR
	if p.kind == messages.KindStored {
		start = &s.startB
	}
	if p.merged {
		*start = max(*start, p.size()) // one cut short by a Flush does not lower it
	} else {
		*start = 0
	}
	out = s.emit(out, *p)
	*p = event{}
	return out
}

// copied returns e with copies of its data, for a piece of the caller's
// input that leaves as an event.
func (e event) copied() event {
	e.blocks = slices.Clone(e.blocks)
	e.removed = slices.Clone(e.removed)
	return e
}

// emit appends e as the stream's next event, with the next id. The event
// takes e's slices: nothing the Stream later appends to may be among them
// (copied).
func (s *Stream) emit(out []messages.RouterEvent, e event) []messages.RouterEvent {
	s.stats.Emitted[e.kind]++
	ev := messages.RouterEvent{
		WorkerID:    s.key.Worker,
		StorageTier: e.tier,
		SessionID:   e.session,
		Event: messages.KvCacheEvent{
			DpRank: s.key.DpRank,
			Kind:   e.kind,
		},
	}
	if e.kind != messages.KindOffloaded { // offloads take no id (see messages.KindOffloaded)
		s.lastID++
		ev.Event.EventID = s.lastID
	}
	switch e.kind {
	case messages.KindStored:
		ev.Event.HasParent, ev.Event.ParentHash = e.hasParent, e.parent
		ev.Event.Blocks = e.blocks
	case messages.KindRemoved:
		ev.Event.Removed = e.removed
	case messages.KindOffloaded:
		ev.Event.Offloaded = e.removed
	}
	return append(out, ev)
}
