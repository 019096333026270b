package radix

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// gen produces random event streams for a few (worker, dp_rank) streams.
// Engine hashes are chained like real engines' (a hash of the stream's
// seed, the parent's engine hash and the block's tokens), so equal prefixes
// give equal engine hashes; workers 1 and 2 share a seed, dp ranks of a
// worker too. Local hashes come from a small alphabet (shared paths, the
// same tokens at several depths) with an occasional wide one (many
// children).
type gen struct {
	r    *rand.Rand
	keys []messages.WorkerKey
	last map[messages.WorkerKey]uint64
	hist map[messages.WorkerKey][]messages.ExternalHash
	ref  *refModel
	wide int // percent of local hashes drawn from a wide alphabet
	root int // percent of stores without parent
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x5eed)), last: map[messages.WorkerKey]uint64{},
		hist: map[messages.WorkerKey][]messages.ExternalHash{}, ref: newRef(), wide: 20, root: 25}
	if seed%3 == 2 {
		g.wide = 60
	}
	for w := messages.WorkerID(1); w <= 4; w++ {
		for r := messages.DpRank(0); r < 2; r++ {
			g.keys = append(g.keys, messages.WorkerKey{Worker: w, DpRank: r})
		}
	}
	return g
}

func mix(x uint64) uint64 {
	x ^= x >> 31
	x *= 0x7fb5d329728ea185
	x ^= x >> 27
	x *= 0x81dadef4bc2dd44d
	return x ^ x>>33
}

func engineHash(k messages.WorkerKey, parent messages.ExternalHash, l messages.LocalHash) messages.ExternalHash {
	seed := uint64(k.Worker)
	if seed == 2 {
		seed = 1
	}
	return messages.ExternalHash(mix(seed*0x9e3779b97f4a7c15 ^ mix(uint64(parent)+uint64(l))))
}

func (g *gen) local() messages.LocalHash {
	if g.r.IntN(100) < g.wide {
		return messages.LocalHash(g.r.IntN(80) + 1)
	}
	return messages.LocalHash(g.r.IntN(4) + 1)
}

func (g *gen) tier() messages.StorageTier {
	switch p := g.r.IntN(100); {
	case p < 60:
		return messages.TierDevice
	case p < 80:
		return messages.TierHost
	case p < 92:
		return messages.TierDisk
	}
	return messages.TierExternal
}

func (g *gen) id(k messages.WorkerKey) uint64 {
	last := g.last[k]
	switch p := g.r.IntN(100); {
	case p < 5 && last > 0:
		return 1 + g.r.Uint64N(last)
	case p < 10:
		g.last[k] = last + 2 + g.r.Uint64N(3)
		return g.last[k]
	case p < 13:
		return 0
	}
	g.last[k] = last + 1
	return last + 1
}

// pick returns a hash of the stream: held (most often), once held, or unknown.
func (g *gen) pick(k messages.WorkerKey) messages.ExternalHash {
	held, hist := g.ref.blocks(k), g.hist[k]
	switch p := g.r.IntN(100); {
	case p < 70 && len(held) > 0:
		return held[g.r.IntN(len(held))]
	case p < 90 && len(hist) > 0:
		return hist[g.r.IntN(len(hist))]
	}
	return messages.ExternalHash(g.r.Uint64())
}

func (g *gen) event(k messages.WorkerKey) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: k.Worker, StorageTier: g.tier(),
		Event: messages.KvCacheEvent{DpRank: k.DpRank, EventID: g.id(k)}}
	switch p := g.r.IntN(100); {
	case p < 55:
		ev.Event.Kind = messages.KindStored
		var cur messages.ExternalHash
		if g.r.IntN(100) >= g.root {
			cur = g.pick(k)
			ev.Event.HasParent, ev.Event.ParentHash = true, cur
		}
		for range 1 + g.r.IntN(6) {
			l := g.local()
			cur = engineHash(k, cur, l)
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: cur, TokensHash: l})
			g.hist[k] = append(g.hist[k], cur)
		}
	case p < 90:
		ev.Event.Kind = messages.KindRemoved
		for range 1 + g.r.IntN(3) {
			h := g.pick(k)
			ev.Event.Removed = append(ev.Event.Removed, h)
			if s := g.ref.streams[k]; s != nil && s.blocks[h] != nil && g.r.IntN(4) != 0 {
				tiers := s.blocks[h].tiers
				ev.StorageTier = messages.StorageTier(fastest(tiers))
			}
		}
	case p < 95:
		ev.Event.Kind = messages.KindCleared
	case p < 97:
		ev.StorageTier = 9
		ev.Event.Kind = messages.KindStored
	default:
		ev.Event.Kind = 9
	}
	return ev
}

// queries returns a few queries: held paths (extended or cut), random ones.
func (g *gen) queries() [][]messages.LocalHash {
	var out [][]messages.LocalHash
	for range 2 {
		k := g.keys[g.r.IntN(len(g.keys))]
		s := g.ref.streams[k]
		if s == nil {
			continue
		}
		var att []messages.ExternalHash
		for _, h := range g.ref.blocks(k) {
			if s.attached(h) {
				att = append(att, h)
			}
		}
		if len(att) == 0 {
			continue
		}
		q := s.path(att[g.r.IntN(len(att))])
		q = q[:1+g.r.IntN(len(q))]
		for range g.r.IntN(3) {
			q = append(q, g.local())
		}
		out = append(out, q)
	}
	q := make([]messages.LocalHash, 1+g.r.IntN(8))
	for i := range q {
		q[i] = g.local()
	}
	return append(out, q)
}

func TestDifferential(t *testing.T) {
	seeds, steps := 320, 150
	if testing.Short() {
		seeds = 40
	}
	for seed := range uint64(seeds) {
		if err := runDiff(newGen(seed), seed, steps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestDifferentialWide grows wide nodes (children maps and back) and long
// histories.
func TestDifferentialWide(t *testing.T) {
	for seed := range uint64(12) {
		g := newGen(1000 + seed)
		g.wide, g.root = 90, 60
		if err := runDiff(g, seed, 600); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func runDiff(g *gen, seed uint64, steps int) error {
	cfg := Config{SetBits: []int{1, 2, 4, 32}[seed%4]}
	tr := New(cfg)
	if seed%3 == 1 {
		// Idle streams first, so the real ones get ids past 64: bitsets of
		// several words, and conversions back to lists.
		for i := range messages.WorkerID(70) {
			ev := messages.RouterEvent{WorkerID: 1000 + i, Event: messages.KvCacheEvent{EventID: 1, Kind: messages.KindCleared}}
			tr.Apply(ev)
			g.ref.apply(ev)
		}
	}
	ov := &Overlap{}
	for step := range steps {
		k := g.keys[g.r.IntN(len(g.keys))]
		what := ""
		switch p := g.r.IntN(100); {
		case p < 6:
			tier, hashes := g.tier(), []messages.ExternalHash{g.pick(k), g.pick(k)}
			r1, u1 := tr.ApplyPlaceholder(k, tier, hashes)
			r2, u2 := g.ref.placeholder(k, tier, hashes)
			what = fmt.Sprintf("placeholder %v %v %x", k, tier, hashes)
			if r1 != r2 || u1 != u2 {
				return fmt.Errorf("step %d %s: resolved %d/%d, want %d/%d", step, what, r1, u1, r2, u2)
			}
		case p < 8:
			tr.Reset(k)
			delete(g.ref.streams, k)
			g.last[k] = 0
			what = fmt.Sprintf("reset %v", k)
		case p < 9:
			tr.RemoveWorker(k.Worker)
			for _, kk := range g.keys {
				if kk.Worker == k.Worker {
					delete(g.ref.streams, kk)
					g.last[kk] = 0
				}
			}
			what = fmt.Sprintf("remove worker %d", k.Worker)
		default:
			ev := g.event(k)
			what = fmt.Sprintf("%+v", ev)
			got, want := tr.Apply(ev), g.ref.apply(ev)
			if got != want {
				return fmt.Errorf("step %d %s: outcome %v %v, want %v %v", step, what, got.Applied, got.Reasons.List(), want.Applied, want.Reasons.List())
			}
		}
		if err := compare(tr, g, ov); err != nil {
			return fmt.Errorf("step %d after %s: %w", step, what, err)
		}
		if step%25 == 24 || step == steps-1 {
			if err := roundTrip(tr, cfg); err != nil {
				return fmt.Errorf("step %d: dump: %w", step, err)
			}
		}
	}
	return nil
}

func compare(tr *Tree, g *gen, ov *Overlap) error {
	if err := tr.check(); err != nil {
		return err
	}
	if tr.stats.Counts != g.ref.counts {
		return fmt.Errorf("counts %v, want %v", tr.stats.Counts, g.ref.counts)
	}
	var refKeys []messages.WorkerKey
	for k := range g.ref.streams {
		refKeys = append(refKeys, k)
	}
	slices.SortFunc(refKeys, compareKeys)
	if got := tr.Workers(); !slices.Equal(got, refKeys) {
		return fmt.Errorf("workers %v, want %v", got, refKeys)
	}
	for _, k := range refKeys {
		if got, want := tr.Blocks(k), g.ref.blocks(k); !slices.Equal(got, want) {
			return fmt.Errorf("%v blocks %x, want %x", k, got, want)
		}
	}
	for _, q := range g.queries() {
		full, freq := g.ref.match(q)
		for _, opt := range []MatchOptions{{Frequencies: true, TreeSizes: true, Tiers: true}, {EarlyExit: true, Frequencies: true}, {}} {
			tr.FindMatches(q, opt, ov)
			got := slices.Clone(ov.Scores)
			if !slices.IsSortedFunc(got, func(a, b Score) int { return int(b.Blocks) - int(a.Blocks) }) {
				return fmt.Errorf("query %v: scores not deepest first: %+v", q, got)
			}
			slices.SortFunc(got, func(a, b Score) int { return compareKeys(a.Key, b.Key) })
			want, wf := withOptions(full, freq, opt)
			if len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
				return fmt.Errorf("query %v %+v: scores %+v, want %+v", q, opt, got, want)
			}
			if len(ov.Frequencies)+len(wf) > 0 && !slices.Equal(ov.Frequencies, wf) {
				return fmt.Errorf("query %v: frequencies %v, want %v", q, ov.Frequencies, wf)
			}
		}
	}
	return nil
}

// roundTrip rebuilds the tree from its dump and compares.
func roundTrip(tr *Tree, cfg Config) error {
	dump := tr.Dump()
	re := New(cfg)
	for _, ev := range dump {
		if len(ev.Event.Blocks) > DumpMaxBlocks {
			return fmt.Errorf("event of %d blocks", len(ev.Event.Blocks))
		}
		re.Apply(ev)
	}
	if err := re.check(); err != nil {
		return err
	}
	if got, want := re.snapshot(), tr.snapshot(); !reflect.DeepEqual(got, want) {
		return fmt.Errorf("rebuilt %v\nwant    %v", got, want)
	}
	if again := re.Dump(); !reflect.DeepEqual(again, dump) {
		return fmt.Errorf("dump of the rebuilt tree differs")
	}
	return nil
}
