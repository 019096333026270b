package radix

// Over 500 lines on purpose: rulesCases is the index's one table of
// rules (README.md, "Rules"), kept whole so every rule is read in one place.

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

type (
	key  = messages.WorkerKey
	hash = messages.ExternalHash
)

var (
	w1   = key{Worker: 1}
	w1r1 = key{Worker: 1, DpRank: 1}
	w2   = key{Worker: 2}
	w3   = key{Worker: 3}
)

const (
	dev  = messages.TierDevice
	host = messages.TierHost
)

// local is the tests' tokens hash of engine hash h: its last two digits, so
// 11 and 211 name the same tokens.
func local(h hash) messages.LocalHash { return messages.LocalHash(h % 100) }

// st is a Stored event of k (parent 0: none) whose blocks' local hashes are
// local(h).
func st(k key, id uint64, tier messages.StorageTier, parent hash, hs ...hash) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: k.Worker, StorageTier: tier, Event: messages.KvCacheEvent{
		EventID: id, DpRank: k.DpRank, Kind: messages.KindStored, HasParent: parent != 0, ParentHash: parent}}
	for _, h := range hs {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: h, TokensHash: local(h)})
	}
	return ev
}

func rm(k key, id uint64, tier messages.StorageTier, hs ...hash) messages.RouterEvent {
	return messages.RouterEvent{WorkerID: k.Worker, StorageTier: tier, Event: messages.KvCacheEvent{
		EventID: id, DpRank: k.DpRank, Kind: messages.KindRemoved, Removed: hs}}
}

func cleared(k key, id uint64) messages.RouterEvent {
	return messages.RouterEvent{WorkerID: k.Worker, Event: messages.KvCacheEvent{EventID: id, DpRank: k.DpRank, Kind: messages.KindCleared}}
}

// q is a query of local hashes.
func q(hs ...uint64) []messages.LocalHash {
	out := make([]messages.LocalHash, len(hs))
	for i, h := range hs {
		out[i] = messages.LocalHash(h)
	}
	return out
}

type step struct {
	ev    messages.RouterEvent
	op    func(*Tree) // instead of ev
	want  []Reason    // the outcome's exact reasons
	stale bool        // not applied
}

type query struct {
	q     []messages.LocalHash
	opt   MatchOptions
	want  map[key]uint32    // Blocks per stream
	tiers map[key][4]uint32 // when set: Tiers per stream
	freq  []uint32          // when set
	sizes map[key]uint32    // when set: TreeSize per stream
}

type rulesCase struct {
	name    string
	steps   []step
	blocks  map[key][]hash // final Blocks per stream
	sizes   map[key]int    // final TreeSize where it is not len(blocks) (aliases)
	queries []query
	counts  map[Reason]uint64 // when set: the final counts (others 0)
	workers []key             // when set: Workers()
}

func TestRules(t *testing.T) {
	for _, c := range rulesCases() {
		t.Run(c.name, func(t *testing.T) { runRules(t, c) })
	}
}

func runRules(t *testing.T, c rulesCase) {
	tr := New(Config{})
	for i, s := range c.steps {
		if s.op != nil {
			s.op(tr)
		} else {
			o := tr.Apply(s.ev)
			if got := o.Reasons.List(); !slices.Equal(got, s.want) && len(got)+len(s.want) > 0 {
				t.Errorf("step %d: reasons %v, want %v", i, got, s.want)
			}
			if o.Applied == s.stale {
				t.Errorf("step %d: applied %v", i, o.Applied)
			}
		}
		if err := tr.check(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	for k, want := range c.blocks {
		if got := tr.Blocks(k); !slices.Equal(got, want) {
			t.Errorf("blocks %v: %v, want %v", k, got, want)
		}
		size, ok := c.sizes[k]
		if !ok {
			size = len(want)
		}
		if got := tr.TreeSize(k); got != size {
			t.Errorf("tree size %v: %d, want %d", k, got, size)
		}
	}
	if c.workers != nil && !slices.Equal(tr.Workers(), c.workers) {
		t.Errorf("workers %v, want %v", tr.Workers(), c.workers)
	}
	for _, qc := range c.queries {
		ov := tr.FindMatches(qc.q, qc.opt, nil)
		got, tiers, sizes := map[key]uint32{}, map[key][4]uint32{}, map[key]uint32{}
		for _, s := range ov.Scores {
			got[s.Key], tiers[s.Key], sizes[s.Key] = s.Blocks, s.Tiers, s.TreeSize
		}
		if !maps.Equal(got, qc.want) && len(got)+len(qc.want) > 0 {
			t.Errorf("query %v: %v, want %v", qc.q, got, qc.want)
		}
		if qc.tiers != nil && !maps.Equal(tiers, qc.tiers) {
			t.Errorf("query %v: tiers %v, want %v", qc.q, tiers, qc.tiers)
		}
		if qc.freq != nil && !slices.Equal(ov.Frequencies, qc.freq) {
			t.Errorf("query %v: frequencies %v, want %v", qc.q, ov.Frequencies, qc.freq)
		}
		if qc.sizes != nil && !maps.Equal(sizes, qc.sizes) {
			t.Errorf("query %v: tree sizes %v, want %v", qc.q, sizes, qc.sizes)
		}
	}
	if c.counts != nil {
		var want [ReasonCount]uint64
		for r, n := range c.counts {
			want[r] = n
		}
		if got := tr.Stats().Counts; got != want {
			t.Errorf("counts %v, want %v", got, want)
		}
	}
	if err := roundTrip(tr, Config{}); err != nil {
		t.Errorf("dump: %v", err)
	}
}

func rulesCases() []rulesCase {
	return []rulesCase{{
		name: "store attaches under the parent's block",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12, 13)},
			{ev: st(w1, 2, dev, 12, 14)},
		},
		blocks: map[key][]hash{w1: {11, 12, 13, 14}},
		queries: []query{
			{q: q(11, 12, 13, 99), want: map[key]uint32{w1: 3}},
			{q: q(11, 12, 14), want: map[key]uint32{w1: 3}},
			{q: q(11, 13), want: map[key]uint32{w1: 1}},
			{q: q(12, 13)},
		},
	}, {
		name: "unknown parent: kept detached, never matched from block 0",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11)},
			{ev: st(w1, 2, dev, 99, 21, 22), want: []Reason{ReasonParentNotFound}},
		},
		blocks: map[key][]hash{w1: {11, 21, 22}},
		queries: []query{
			{q: q(21, 22)}, // same tokens as the detached chain, but at depth 0: no hit
			{q: q(11, 21, 22), want: map[key]uint32{w1: 1}},
		},
		counts: map[Reason]uint64{ReasonParentNotFound: 1},
	}, {
		name: "detached chains continue and are grafted when their parent is stored",
		steps: []step{
			{ev: st(w1, 1, dev, 12, 13), want: []Reason{ReasonParentNotFound}},
			{ev: st(w1, 2, host, 13, 14), want: []Reason{ReasonDetachedParent}},
			{ev: st(w1, 3, dev, 0, 11, 12), want: []Reason{ReasonGrafted}},
			{ev: st(w1, 4, dev, 14, 15)},
		},
		blocks: map[key][]hash{w1: {11, 12, 13, 14, 15}},
		queries: []query{{q: q(11, 12, 13, 14, 15), opt: MatchOptions{Tiers: true},
			want: map[key]uint32{w1: 5}, tiers: map[key][4]uint32{w1: {4, 1}}}},
		counts: map[Reason]uint64{ReasonParentNotFound: 1, ReasonDetachedParent: 1, ReasonGrafted: 2},
	}, {
		name: "remove drops the stream's subtree, not other streams'",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12, 13)},
			{ev: st(w1, 2, dev, 12, 15)},
			{ev: st(w2, 1, dev, 0, 211, 212, 213)},
			{ev: rm(w1, 3, dev, 12), want: []Reason{ReasonCascaded}},
		},
		blocks:  map[key][]hash{w1: {11}, w2: {211, 212, 213}},
		queries: []query{{q: q(11, 12, 13), want: map[key]uint32{w1: 1, w2: 3}}},
		counts:  map[Reason]uint64{ReasonCascaded: 2},
	}, {
		name: "a block removed and stored again elsewhere leaves its old parent",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: rm(w1, 2, dev, 12)},
			{ev: st(w1, 3, dev, 0, 15, 12)},
			{ev: rm(w1, 4, dev, 11)},
		},
		blocks:  map[key][]hash{w1: {12, 15}},
		queries: []query{{q: q(15, 12), want: map[key]uint32{w1: 2}}, {q: q(11, 12)}},
	}, {
		name: "unknown removed hashes are counted no-ops",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: rm(w1, 2, dev, 77), want: []Reason{ReasonUnknownRemoved}},
			{ev: rm(w1, 3, dev, 11, 12), want: []Reason{ReasonUnknownRemoved, ReasonCascaded}},
		},
		blocks: map[key][]hash{w1: {}},
		counts: map[Reason]uint64{ReasonUnknownRemoved: 2, ReasonCascaded: 1},
	}, {
		name: "cleared is scoped to its (worker, dp_rank) and keeps the id position",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11)},
			{ev: st(w1r1, 1, dev, 0, 11)},
			{ev: st(w2, 1, dev, 0, 211)},
			{ev: st(w1, 2, host, 99, 21), want: []Reason{ReasonParentNotFound}},
			{ev: cleared(w1, 5), want: []Reason{ReasonIDGap}},
			{ev: st(w1, 5, dev, 0, 12), want: []Reason{ReasonStale}, stale: true},
			{ev: st(w1, 6, dev, 0, 13)},
		},
		blocks:  map[key][]hash{w1: {13}, w1r1: {11}, w2: {211}},
		queries: []query{{q: q(11), want: map[key]uint32{w1r1: 1, w2: 1}}},
	}, {
		name: "dp ranks are kept apart",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1r1, 1, dev, 0, 11, 12)},
			{ev: rm(w1r1, 2, dev, 12)},
			{ev: st(w1r1, 3, dev, 12, 13), want: []Reason{ReasonParentNotFound}},
		},
		blocks:  map[key][]hash{w1: {11, 12}, w1r1: {11, 13}},
		queries: []query{{q: q(11, 12, 13), want: map[key]uint32{w1: 2, w1r1: 1}}},
	}, {
		name: "event ids: stale, gaps, unsequenced",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11)},
			{ev: st(w1, 1, dev, 0, 12), want: []Reason{ReasonStale}, stale: true},
			{ev: st(w1, 3, dev, 0, 13), want: []Reason{ReasonIDGap}},
			{ev: st(w1, 0, dev, 0, 14), want: []Reason{ReasonUnsequenced}},
			{ev: st(w1, 4, dev, 0, 15)},
			{ev: st(w2, 5, dev, 0, 16), want: []Reason{ReasonIDGap}},
		},
		blocks: map[key][]hash{w1: {11, 13, 14, 15}, w2: {16}},
		counts: map[Reason]uint64{ReasonStale: 1, ReasonIDGap: 2, ReasonUnsequenced: 1},
	}, {
		name: "invalid kinds and tiers consume their id",
		steps: []step{
			{ev: messages.RouterEvent{WorkerID: 1, Event: messages.KvCacheEvent{EventID: 1, Kind: 9}}, want: []Reason{ReasonInvalid}, stale: true},
			{ev: st(w1, 2, 4, 0, 11), want: []Reason{ReasonInvalid}, stale: true},
			{ev: st(w1, 2, dev, 0, 12), want: []Reason{ReasonStale}, stale: true},
		},
		blocks: map[key][]hash{w1: {}},
	}, {
		name: "reset forgets blocks and id position",
		steps: []step{
			{ev: st(w1, 7, dev, 0, 11), want: []Reason{ReasonIDGap}},
			{op: func(t *Tree) { t.Reset(w1) }},
			{ev: st(w1, 1, dev, 0, 12)},
		},
		blocks:  map[key][]hash{w1: {12}},
		workers: []key{w1},
	}, {
		name: "remove worker drops all its ranks",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11)},
			{ev: st(w1r1, 1, dev, 99, 11), want: []Reason{ReasonParentNotFound}},
			{ev: st(w2, 1, dev, 0, 11)},
			{op: func(t *Tree) { t.RemoveWorker(1) }},
		},
		blocks:  map[key][]hash{w1: nil, w1r1: nil, w2: {11}},
		workers: []key{w2},
		queries: []query{{q: q(11), want: map[key]uint32{w2: 1}}},
	}, {
		name: "duplicate stores of a block: one remove drops it",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1, 2, dev, 0, 11, 12), want: []Reason{ReasonDuplicateStore}},
			{ev: rm(w1, 3, dev, 12)},
		},
		blocks: map[key][]hash{w1: {11}},
		counts: map[Reason]uint64{ReasonDuplicateStore: 2},
	}, {
		name: "tier change of a held block",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1, 2, host, 11, 12), want: []Reason{ReasonDuplicateStore}},
			{ev: rm(w1, 3, dev, 12)},
			{ev: rm(w1, 4, dev, 12), want: []Reason{ReasonTierNotHeld}},
		},
		blocks: map[key][]hash{w1: {11, 12}},
		queries: []query{{q: q(11, 12), opt: MatchOptions{Tiers: true},
			want: map[key]uint32{w1: 2}, tiers: map[key][4]uint32{w1: {1, 1}}}},
	}, {
		name: "a prefix held on host keeps its device children",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1, 2, host, 0, 11), want: []Reason{ReasonDuplicateStore}},
			{ev: rm(w1, 3, dev, 11)},
		},
		blocks: map[key][]hash{w1: {11, 12}},
		queries: []query{{q: q(11, 12), opt: MatchOptions{Tiers: true},
			want: map[key]uint32{w1: 2}, tiers: map[key][4]uint32{w1: {1, 1}}}},
	}, {
		name: "placeholders resolve through the stream's engine hashes",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1, 2, dev, 99, 21), want: []Reason{ReasonParentNotFound}},
			{op: func(t *Tree) {
				if r, u := t.ApplyPlaceholder(w1, host, []hash{12, 21, 77}); r != 2 || u != 1 {
					panic("placeholder counts")
				}
				if r, u := t.ApplyPlaceholder(w2, host, []hash{12}); r != 0 || u != 1 {
					panic("placeholder of an unknown stream")
				}
			}},
			{ev: rm(w1, 3, dev, 12, 21)},
		},
		blocks: map[key][]hash{w1: {11, 12, 21}},
		queries: []query{{q: q(11, 12), opt: MatchOptions{Tiers: true},
			want: map[key]uint32{w1: 2}, tiers: map[key][4]uint32{w1: {1, 1}}}},
		counts: map[Reason]uint64{ReasonParentNotFound: 1, ReasonPlaceholderResolved: 2, ReasonPlaceholderUnresolved: 2},
	}, {
		name: "a second engine hash for a held block aliases it",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1, 2, host, 0, 111), want: []Reason{ReasonAliasedBlock}},
			{ev: rm(w1, 3, dev, 11)},
			{ev: rm(w1, 4, host, 11), want: []Reason{ReasonCascaded}},
		},
		blocks: map[key][]hash{w1: {}},
	}, {
		name: "aliases survive a dump",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12)},
			{ev: st(w1, 2, host, 0, 111, 112), want: []Reason{ReasonAliasedBlock}},
		},
		blocks:  map[key][]hash{w1: {11, 12, 111, 112}},
		sizes:   map[key]int{w1: 2},
		queries: []query{{q: q(11, 12), want: map[key]uint32{w1: 2}}},
		counts:  map[Reason]uint64{ReasonAliasedBlock: 2},
	}, {
		name: "frequencies, early exit, tree sizes",
		steps: []step{
			{ev: st(w1, 1, dev, 0, 11, 12, 13)},
			{ev: st(w2, 1, dev, 0, 211, 212)},
			{ev: st(w3, 1, dev, 0, 311)},
			{ev: st(w3, 2, dev, 99, 320), want: []Reason{ReasonParentNotFound}},
		},
		queries: []query{
			{q: q(11, 12, 13, 14), opt: MatchOptions{Frequencies: true, TreeSizes: true},
				want: map[key]uint32{w1: 3, w2: 2, w3: 1}, freq: []uint32{3, 2, 1},
				sizes: map[key]uint32{w1: 3, w2: 2, w3: 2}},
			{q: q(11, 12, 13), opt: MatchOptions{EarlyExit: true, Frequencies: true},
				want: map[key]uint32{w1: 1, w2: 1, w3: 1}, freq: []uint32{3}},
		},
	}, {
		name: "removing a detached block drops its detached descendants",
		steps: []step{
			{ev: st(w1, 1, dev, 99, 21, 22, 23), want: []Reason{ReasonParentNotFound}},
			{ev: st(w1, 2, dev, 21, 24), want: []Reason{ReasonDetachedParent}},
			{ev: rm(w1, 3, dev, 22), want: []Reason{ReasonCascaded}},
			{ev: rm(w1, 4, host, 21), want: []Reason{ReasonTierNotHeld}},
		},
		blocks: map[key][]hash{w1: {21, 24}},
	}, {
		name: "a cycle of engine hashes is refused",
		steps: []step{
			{ev: st(w1, 1, dev, 30, 31), want: []Reason{ReasonParentNotFound}},
			{ev: st(w1, 2, dev, 31, 32, 30), want: []Reason{ReasonInvalid, ReasonDetachedParent}},
		},
		blocks: map[key][]hash{w1: {31, 32}},
	}, wideSets(), wideFanout()}
}

// wideSets: 150 streams share a chain (bitsets of three words), then most
// drop its second block (back to lists).
func wideSets() rulesCase {
	c := rulesCase{name: "wide worker sets", queries: []query{{q: q(11, 12), opt: MatchOptions{Frequencies: true},
		want: map[key]uint32{}, freq: []uint32{150, 10}}}}
	for w := range messages.WorkerID(150) {
		k := key{Worker: w + 10}
		c.steps = append(c.steps, step{ev: st(k, 1, dev, 0, 11, 12)})
		c.queries[0].want[k] = 1
		if w < 140 {
			c.steps = append(c.steps, step{ev: rm(k, 2, dev, 12)})
		} else {
			c.queries[0].want[k] = 2
		}
	}
	return c
}

// wideFanout: 40 roots (a children map), then 35 removed (back to slices).
func wideFanout() rulesCase {
	c := rulesCase{name: "wide fanout", blocks: map[key][]hash{w1: {}}}
	for h := hash(101); h <= 140; h++ {
		c.steps = append(c.steps, step{ev: st(w1, 0, dev, 0, h, h+100), want: []Reason{ReasonUnsequenced}})
	}
	for h := hash(101); h <= 135; h++ {
		c.steps = append(c.steps, step{ev: rm(w1, 0, dev, h), want: []Reason{ReasonUnsequenced, ReasonCascaded}})
	}
	for h := hash(136); h <= 140; h++ {
		c.blocks[w1] = append(c.blocks[w1], h)
		c.queries = append(c.queries, query{q: q(uint64(h%100), uint64(h%100)), want: map[key]uint32{w1: 2}})
	}
	for h := hash(236); h <= 240; h++ {
		c.blocks[w1] = append(c.blocks[w1], h)
	}
	return c
}

func TestSweepDropsStaleLookups(t *testing.T) {
	tr := New(Config{})
	var chain []hash
	for h := hash(1000); h < 1200; h++ {
		chain = append(chain, h)
	}
	tr.Apply(st(w1, 1, dev, 0, chain...))
	tr.Apply(st(w1, 2, dev, 0, 50))
	if o := tr.Apply(rm(w1, 3, dev, 1000)); !o.Has(ReasonCascaded) || tr.Stats().Counts[ReasonCascaded] != 199 {
		t.Fatalf("outcome %v, counts %v", o.Reasons.List(), tr.Stats().Counts)
	}
	if s := tr.streams[w1]; s.lookup.Len() != 1 || s.stale != 0 {
		t.Errorf("lookup %d entries, stale %d: want 1, 0", s.lookup.Len(), s.stale)
	}
	if sz := tr.Size(); sz != (Size{Blocks: 1, Entries: 1, Streams: 1}) {
		t.Errorf("size %+v", sz)
	}
}

// TestMemIndexSemantics replays actors/indexer's MemIndex tests.
func TestMemIndexSemantics(t *testing.T) {
	x := New(Config{})
	x.Apply(st(w1, 1, dev, 0, 1, 2, 3))
	x.Apply(st(w1, 2, dev, 2, 4))
	x.Apply(st(w1, 3, dev, 9, 5))
	if got := x.Blocks(w1); !slices.Equal(got, []hash{1, 2, 3, 4, 5}) {
		t.Fatalf("blocks %v", got)
	}
	x.Apply(rm(w1, 4, dev, 2))
	if got := x.Blocks(w1); !slices.Equal(got, []hash{1, 5}) {
		t.Fatalf("after remove: %v", got)
	}
	x.Apply(st(w1, 5, dev, 1, 3))
	x.Apply(rm(w1, 6, dev, 77))
	x.Apply(st(w1, 6, dev, 0, 8))
	x.Apply(st(w1, 9, dev, 0, 9))
	if got := x.Blocks(w1); !slices.Equal(got, []hash{1, 3, 5, 9}) {
		t.Fatalf("blocks %v", got)
	}
	c := x.Stats().Counts
	if c[ReasonParentNotFound] != 1 || c[ReasonUnknownRemoved] != 1 || c[ReasonStale] != 1 || c[ReasonIDGap] != 1 {
		t.Errorf("counts %v", c)
	}
	x.Apply(st(w1r1, 1, dev, 0, 1))
	x.Apply(cleared(w1, 10))
	if len(x.Blocks(w1)) != 0 || len(x.Blocks(w1r1)) != 1 {
		t.Fatal("a clear is scoped to its (worker, dp_rank)")
	}
	x.Reset(w1r1)
	if len(x.Workers()) != 1 {
		t.Fatalf("workers %v", x.Workers())
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := range ReasonCount {
		n := r.String()
		if n == "" || seen[n] {
			t.Errorf("reason %d: name %q", r, n)
		}
		seen[n] = true
	}
	if ReasonCount > 32 {
		t.Error("ReasonSet is a uint32")
	}
}

// TestConcurrentQueries: FindMatches only reads, so goroutines may share a
// tree (each with its own Overlap) while nothing applies. Run with -race.
func TestConcurrentQueries(t *testing.T) {
	c := newCorpus(5_000, 50, 6)
	tr, _ := c.build(c.events())
	qs := c.queries(200, 7)
	want := make([]int, len(qs))
	for i, qq := range qs {
		want[i] = len(tr.FindMatches(qq, MatchOptions{}, nil).Scores)
	}
	done := make(chan error)
	for range 2 {
		go func() {
			ov := &Overlap{}
			for i, qq := range qs {
				if got := len(tr.FindMatches(qq, MatchOptions{Frequencies: true, TreeSizes: true, Tiers: true}, ov).Scores); got != want[i] {
					done <- fmt.Errorf("query %d: %d scores, want %d", i, got, want[i])
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
