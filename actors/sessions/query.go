package sessions

import (
	"math"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
)

// Holder is a session's lineage on one (worker, dp_rank).
type Holder struct {
	Key messages.WorkerKey
	// Depth is the length of the chain ending at Newest: Newest and its
	// ancestors in the lineage, back to the start of its segment.
	Depth uint32
	// Blocks counts the lineage's live blocks (every segment and branch).
	Blocks int
	// Newest is the engine hash of the block the session stored last on
	// this stream.
	Newest messages.ExternalHash
	// Updated is the now of that store.
	Updated time.Time
	// Chain lists the engine hashes from the segment start to Newest
	// (Depth of them). Only Get fills it.
	Chain []messages.ExternalHash
}

// Session is a session's lineage everywhere (GET /sessions/{id}).
type Session struct {
	ID string
	// LastSeen is the now of the session's last store.
	LastSeen time.Time
	// Holders are newest first.
	Holders []Holder
}

// Holders returns the session's lineages, one per (worker, dp_rank), newest
// first (by the order of their last appended block); nil for a session the
// index does not hold.
func (x *Index) Holders(id string) []Holder {
	s := x.sessions.get(id)
	if s == nil {
		return nil
	}
	return x.holders(s, false)
}

// Get returns the session with each holder's chain.
func (x *Index) Get(id string) (Session, bool) {
	s := x.sessions.get(id)
	if s == nil {
		return Session{}, false
	}
	return Session{ID: s.id, LastSeen: x.at(s.lastSeen), Holders: x.holders(s, true)}, true
}

func (x *Index) holders(s *session, chain bool) []Holder {
	lins := sortedLins(s, nil)
	out := make([]Holder, len(lins))
	for i, l := range lins {
		h := Holder{Key: l.st.key, Depth: l.depth, Blocks: int(l.live), Newest: l.newest(), Updated: x.at(l.updated)}
		if chain {
			h.Chain = make([]messages.ExternalHash, l.depth)
			j := len(h.Chain)
			for p := int32(len(l.hashes) - 1); p >= 0 && j > 0; p = l.parent(p) {
				j--
				h.Chain[j] = l.hashes[p]
			}
		}
		out[i] = h
	}
	return out
}

// sortedLins appends s's lineages to dst, newest first.
func sortedLins(s *session, dst []*lineage) []*lineage {
	dst = append(dst, s.lins...)
	slices.SortFunc(dst, func(a, b *lineage) int {
		switch {
		case a.stamp > b.stamp:
			return -1
		case a.stamp < b.stamp:
			return 1
		}
		return 0
	})
	return dst
}

// Bonus is a session credit toward one (worker, dp_rank), in blocks.
type Bonus struct {
	Key    messages.WorkerKey
	Blocks uint32
}

// Credit appends to dst the session credit for a route request carrying
// session id: toward the candidate holding the session's newest lineage
// (the most recently appended among the candidates' streams),
// ⌊weight × Depth⌋ blocks. Nothing for an unknown session, a session with no
// lineage on any candidate, or a weight that is not positive and finite.
//
// Only candidates can get a credit: a session id (untrusted, from the route
// request and from the engines) moves the choice among the workers the
// request may use and never adds one. The physical overlap stays the
// primary signal: combine the two with Combine, i.e. per (worker, dp_rank)
//
//	effective_overlap = min(overlap + credit, request_blocks)
//
// and pass the result to routing.Router.Decide as the overlaps. A weight of
// 1 counts every block of the session's newest chain as one more cached
// block on its holder; smaller weights only break near-ties toward it.
// Because the credit is bounded by what the session itself stored on that
// stream (at most MaxDepth blocks), a worker with a much longer physical
// match still wins.
func (x *Index) Credit(id string, weight float64, cands []routing.Candidate, dst []Bonus) []Bonus {
	s := x.sessions.get(id)
	if s == nil || !(weight > 0) || math.IsInf(weight, 1) {
		return dst
	}
	var best *lineage
	for _, l := range s.lins {
		if best != nil && l.stamp < best.stamp {
			continue
		}
		for i := range cands {
			if cands[i].Key == l.st.key {
				best = l
				break
			}
		}
	}
	if best == nil {
		return dst
	}
	b := math.Floor(weight * float64(best.depth))
	if b < 1 {
		return dst
	}
	return append(dst, Bonus{Key: best.st.key, Blocks: uint32(min(b, math.MaxUint32))})
}

// Combine appends to dst the overlaps with the credits added: for each
// bonus, every overlap of its key becomes min(largest overlap of the key +
// bonus, limit) — never less than the physical overlap — and a key without
// an overlap is appended with min(bonus, limit). limit is the request's
// block count ⌈isl / block size⌉ (0: no limit; Decide caps cached tokens at
// isl anyway). overlaps is not modified.
func Combine(overlaps []routing.Overlap, bonus []Bonus, limit uint32, dst []routing.Overlap) []routing.Overlap {
	start := len(dst)
	dst = append(dst, overlaps...)
	for _, b := range bonus {
		base, found := uint32(0), false
		for _, o := range dst[start:] {
			if o.Key == b.Key {
				base, found = max(base, o.Blocks), true
			}
		}
		v := base + b.Blocks
		if v < base { // saturate
			v = math.MaxUint32
		}
		if limit > 0 && v > limit {
			v = max(limit, base)
		}
		if !found {
			dst = append(dst, routing.Overlap{Key: b.Key, Blocks: v})
			continue
		}
		for i := start; i < len(dst); i++ {
			if dst[i].Key == b.Key {
				dst[i].Blocks = v
			}
		}
	}
	return dst
}
