// Package indexer applies RouterEvents to kvrouter's index. For now it holds
// MemIndex, a plain per-worker block map that the pipeline and its tests use
// until the sharded radix index (issue 4) replaces it.
package indexer

import (
	"cmp"
	"maps"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// MemIndex records, per (worker, dp_rank), which engine blocks are held,
// with their local hash and parent. It applies §6's per-worker rules:
// a remove drops the block and its descendants on that worker; a clear drops
// the (worker, dp_rank).
type MemIndex struct {
	streams map[messages.WorkerKey]*streamBlocks
	stats   MemStats
}

// MemStats counts what MemIndex saw.
type MemStats struct {
	Applied        uint64
	IDGaps         uint64 // event ids that skipped ahead
	Stale          uint64 // event ids at or below the last applied
	UnknownParent  uint64 // stored chains whose parent this worker does not hold
	UnknownRemoved uint64 // removes of blocks this worker does not hold
}

type block struct {
	local    messages.LocalHash
	parent   messages.ExternalHash
	root     bool
	tier     messages.StorageTier
	children []messages.ExternalHash
}

type streamBlocks struct {
	lastID uint64
	blocks map[messages.ExternalHash]*block
}

// NewMemIndex returns an empty index.
func NewMemIndex() *MemIndex {
	return &MemIndex{streams: map[messages.WorkerKey]*streamBlocks{}}
}

// Stats returns the counters.
func (x *MemIndex) Stats() MemStats { return x.stats }

func (x *MemIndex) stream(k messages.WorkerKey) *streamBlocks {
	s := x.streams[k]
	if s == nil {
		s = &streamBlocks{blocks: map[messages.ExternalHash]*block{}}
		x.streams[k] = s
	}
	return s
}

// Clear drops everything of (worker, dp_rank), including its event-id
// position (the next event starts a new sequence).
func (x *MemIndex) Clear(k messages.WorkerKey) { delete(x.streams, k) }

// Apply applies one event.
func (x *MemIndex) Apply(ev messages.RouterEvent) {
	k := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	s := x.stream(k)
	id := ev.Event.EventID
	switch {
	case s.lastID != 0 && id <= s.lastID:
		x.stats.Stale++
		return
	case s.lastID != 0 && id > s.lastID+1:
		x.stats.IDGaps++
	}
	s.lastID = id
	x.stats.Applied++
	switch ev.Event.Kind {
	case messages.KindCleared:
		s.blocks = map[messages.ExternalHash]*block{}
	case messages.KindStored:
		parent, root := ev.Event.ParentHash, !ev.Event.HasParent
		if !root && s.blocks[parent] == nil {
			x.stats.UnknownParent++
			root = true // kept as a detached chain: its blocks are held
		}
		for _, b := range ev.Event.Blocks {
			if old := s.blocks[b.BlockHash]; old != nil {
				old.tier = ev.StorageTier
				parent, root = b.BlockHash, false
				continue
			}
			s.blocks[b.BlockHash] = &block{local: b.TokensHash, parent: parent, root: root, tier: ev.StorageTier}
			if !root {
				p := s.blocks[parent]
				p.children = append(p.children, b.BlockHash)
			}
			parent, root = b.BlockHash, false
		}
	case messages.KindRemoved:
		for _, h := range ev.Event.Removed {
			if s.blocks[h] == nil {
				x.stats.UnknownRemoved++
				continue
			}
			s.remove(h)
		}
	}
}

// remove drops h and its descendants.
func (s *streamBlocks) remove(h messages.ExternalHash) {
	if b := s.blocks[h]; !b.root {
		if p := s.blocks[b.parent]; p != nil {
			p.children = slices.DeleteFunc(p.children, func(c messages.ExternalHash) bool { return c == h })
		}
	}
	stack := []messages.ExternalHash{h}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if b := s.blocks[top]; b != nil {
			stack = append(stack, b.children...)
			delete(s.blocks, top)
		}
	}
}

// Blocks returns the engine hashes held by (worker, dp_rank), sorted.
func (x *MemIndex) Blocks(k messages.WorkerKey) []messages.ExternalHash {
	s := x.streams[k]
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.blocks))
}

// Streams lists the (worker, dp_rank) keys with state.
func (x *MemIndex) Streams() []messages.WorkerKey {
	return slices.SortedFunc(maps.Keys(x.streams), func(a, b messages.WorkerKey) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.DpRank, b.DpRank))
	})
}
