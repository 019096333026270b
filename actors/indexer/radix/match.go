package radix

import (
	"math/bits"

	"github.com/kvrouter/kvrouter/messages"
)

// MatchOptions selects what FindMatches computes besides the scores.
type MatchOptions struct {
	// EarlyExit stops after block 0: every stream holding it scores 1.
	EarlyExit bool
	// Frequencies fills Overlap.Frequencies.
	Frequencies bool
	// TreeSizes fills Score.TreeSize.
	TreeSizes bool
	// Tiers fills Score.Tiers.
	Tiers bool
	// Reach fills Score.Reach.
	Reach bool
}

// Score is one stream's overlap with a query.
type Score struct {
	Key messages.WorkerKey
	// Blocks is the number of leading query blocks the stream holds,
	// contiguously from block 0 (on any tier).
	Blocks uint32
	// TreeSize is the number of blocks the stream holds, detached ones
	// included (MatchOptions.TreeSizes).
	TreeSize uint32
	// Tiers splits Blocks by the fastest tier holding each block, indexed
	// by messages.StorageTier; it sums to Blocks (MatchOptions.Tiers).
	Tiers [4]uint32
	// Reach is the prefix held through the fast tiers (MatchOptions.Reach):
	// Reach[0] the leading query blocks held on device, Reach[1] those held
	// on device or host. Reach[0] ≤ Reach[1] ≤ Blocks; Blocks itself is
	// the reach through every tier (reach.go).
	Reach [2]uint32
}

// Overlap is FindMatches' answer. Reuse one per goroutine: FindMatches
// overwrites it and keeps its buffers, so a warm Overlap costs no
// allocation.
type Overlap struct {
	// Scores has one entry per stream holding block 0 of the query (zeros
	// are omitted), deepest match first, then by the streams' interned
	// ids (stable while they live; sort by Key for a canonical order).
	Scores []Score
	// Frequencies[i] is the number of streams holding blocks 0..i
	// (MatchOptions.Frequencies); its length is the deepest match.
	Frequencies []uint32

	path []uint32 // scratch: the matched nodes
	ids  []uint32 // scratch: the interned id of each score
	seen []uint64 // scratch: ids already scored
	slot []int32  // scratch: id → score index
}

// FindMatches computes, for each stream, how many leading blocks of the
// query (local hashes) it holds contiguously from block 0. Because a
// stream never holds a block without its prefix, the streams holding the
// query's block i are a subset of those holding block i-1: the walk follows
// the query down the tree once, then visits the matched blocks deepest
// first and scores each stream at the first block where it appears. A
// block's bitset is handled a word at a time. out may be nil.
func (t *Tree) FindMatches(hashes []messages.LocalHash, opt MatchOptions, out *Overlap) *Overlap {
	if out == nil {
		out = &Overlap{}
	}
	out.Scores, out.Frequencies, out.ids = out.Scores[:0], out.Frequencies[:0], out.ids[:0]
	path := out.path[:0]
	for x := uint32(0); len(path) < len(hashes); {
		if x = t.findChild(x, hashes[len(path)]); x == 0 {
			break
		}
		path = append(path, x)
		if opt.EarlyExit {
			break
		}
	}
	out.path = path
	if len(path) == 0 {
		return out
	}
	nw := (len(t.byID) + 63) >> 6
	if cap(out.seen) < nw {
		out.seen = make([]uint64, nw)
	}
	seen := out.seen[:nw]
	clear(seen)
	for i := len(path) - 1; i >= 0; i-- {
		nd := t.node(path[i])
		depth := uint32(i + 1)
		switch nd.n {
		case 0:
		case 1:
			out.score(t, seen, nd.ent>>4, depth)
		default:
			ws := &t.sets[nd.ent]
			if ws.bits == nil {
				for _, e := range ws.list {
					out.score(t, seen, e>>4, depth)
				}
				continue
			}
			for k, w := range ws.bits.any {
				fresh := w &^ seen[k]
				seen[k] |= fresh
				for fresh != 0 {
					id := uint32(k<<6 + bits.TrailingZeros64(fresh))
					fresh &= fresh - 1
					out.Scores = append(out.Scores, Score{Key: t.keys[id], Blocks: depth})
					out.ids = append(out.ids, id)
				}
			}
		}
	}
	if opt.Frequencies {
		for _, x := range path {
			out.Frequencies = append(out.Frequencies, t.node(x).n)
		}
	}
	if opt.TreeSizes {
		for j, id := range out.ids {
			s := t.byID[id]
			out.Scores[j].TreeSize = uint32(s.size + s.det.size())
		}
	}
	if opt.Tiers {
		t.tiers(out)
	}
	if opt.Reach {
		t.reach(out)
	}
	return out
}

func (o *Overlap) score(t *Tree, seen []uint64, id, depth uint32) {
	w, m := id>>6, uint64(1)<<(id&63)
	if seen[w]&m != 0 {
		return
	}
	seen[w] |= m
	o.Scores = append(o.Scores, Score{Key: t.keys[id], Blocks: depth})
	o.ids = append(o.ids, id)
}

// tiers fills Score.Tiers: blocks held on device are the common case, so
// only the others are visited and device gets the remainder.
func (t *Tree) tiers(out *Overlap) {
	t.fillSlots(out)
	add := func(e uint32) {
		if b := e & tierMask; b&1 == 0 {
			out.Scores[out.slot[e>>4]].Tiers[bits.TrailingZeros32(b)]++
		}
	}
	for _, x := range out.path {
		nd := t.node(x)
		switch nd.n {
		case 0:
		case 1:
			add(nd.ent)
		default:
			ws := &t.sets[nd.ent]
			if ws.bits == nil {
				for _, e := range ws.list {
					add(e)
				}
				continue
			}
			tb := ws.bits
			for k := range tb.any {
				var faster uint64
				for tt := range tb.tier {
					var w uint64
					if k < len(tb.tier[tt]) {
						w = tb.tier[tt][k]
					}
					for slower := w &^ faster; tt > 0 && slower != 0; slower &= slower - 1 {
						id := k<<6 + bits.TrailingZeros64(slower)
						out.Scores[out.slot[id]].Tiers[tt]++
					}
					faster |= w
				}
			}
		}
	}
	for j := range out.Scores {
		sc := &out.Scores[j]
		sc.Tiers[0] = sc.Blocks - sc.Tiers[1] - sc.Tiers[2] - sc.Tiers[3]
	}
}
