package simengine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// model rebuilds a cache's contents from its event stream alone, checking
// every event against the prefix-closure rules a router relies on.
type model struct {
	t      *testing.T
	bs     int
	blocks map[uint64]Block
}

func newModel(t *testing.T, bs int) *model {
	return &model{t: t, bs: bs, blocks: make(map[uint64]Block)}
}

func (m *model) apply(events []Event) {
	m.t.Helper()
	for _, ev := range events {
		switch ev.Kind {
		case EventCleared:
			clear(m.blocks)
		case EventRemoved:
			for _, h := range ev.Hashes {
				if _, ok := m.blocks[h]; !ok {
					m.t.Fatalf("BlockRemoved of %#x, which is not held", h)
				}
				for _, b := range m.blocks {
					if b.HasParent && b.Parent == h {
						m.t.Fatalf("BlockRemoved of %#x while its child %#x is held", h, b.Hash)
					}
				}
				delete(m.blocks, h)
			}
		case EventStored:
			if ev.HasParent {
				if _, ok := m.blocks[ev.Parent]; !ok {
					m.t.Fatalf("BlockStored continues %#x, which is not held", ev.Parent)
				}
			}
			if len(ev.Tokens) != len(ev.Hashes)*m.bs || ev.BlockSize != m.bs {
				m.t.Fatalf("BlockStored has %d tokens for %d blocks of %d", len(ev.Tokens), len(ev.Hashes), ev.BlockSize)
			}
			parent, has := ev.Parent, ev.HasParent
			for i, h := range ev.Hashes {
				if _, dup := m.blocks[h]; dup {
					m.t.Fatalf("BlockStored of %#x, which is already held", h)
				}
				m.blocks[h] = Block{Hash: h, Parent: parent, HasParent: has,
					Tokens: ev.Tokens[i*m.bs : (i+1)*m.bs], LoraName: ev.LoraName, CacheSalt: ev.CacheSalt}
				parent, has = h, true
			}
		default:
			m.t.Fatalf("unknown event kind %v", ev.Kind)
		}
	}
}

// equal checks the model against a snapshot, block by block.
func (m *model) equal(s Snapshot) {
	m.t.Helper()
	if len(s.Blocks) != len(m.blocks) {
		m.t.Fatalf("cache holds %d blocks, events imply %d", len(s.Blocks), len(m.blocks))
	}
	for h, want := range m.blocks {
		got, ok := s.Blocks[h]
		if !ok {
			m.t.Fatalf("events imply block %#x, the cache does not hold it", h)
		}
		if got.Parent != want.Parent || got.HasParent != want.HasParent || !slices.Equal(got.Tokens, want.Tokens) ||
			got.LoraName != want.LoraName || got.CacheSalt != want.CacheSalt {
			m.t.Fatalf("block %#x: cache %+v, events imply %+v", h, got, want)
		}
	}
}

func mustCache(t *testing.T, cfg Config) *Cache {
	t.Helper()
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seqTokens returns n tokens start, start+1, ….
func seqTokens(start, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(start + i)
	}
	return t
}

func TestNewCacheRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{BlockSize: 0, CapacityBlocks: 1}, {BlockSize: 4, CapacityBlocks: 0}, {BlockSize: -1, CapacityBlocks: 4}} {
		if _, err := NewCache(cfg); err == nil {
			t.Errorf("NewCache(%+v) accepted", cfg)
		}
	}
}

func TestCacheStoresHitsAndContinuesChains(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 4, CapacityBlocks: 16})
	prompt := seqTokens(0, 14) // 3 complete blocks + 2 tokens

	cached, evs := c.Serve(prompt)
	if cached != 0 || len(evs) != 1 {
		t.Fatalf("first serve: cached %d, %d events; want 0, 1", cached, len(evs))
	}
	st := evs[0]
	if st.Kind != EventStored || len(st.Hashes) != 3 || st.HasParent || len(st.Tokens) != 12 || st.Medium != "GPU" {
		t.Fatalf("first stored event = %+v", st)
	}
	if want := c.Hashes(Request{Tokens: prompt}, -1); !slices.Equal(st.Hashes, want) {
		t.Fatalf("stored hashes %x, Hashes() %x", st.Hashes, want)
	}

	if cached, evs = c.Serve(prompt[:13]); cached != 3 || len(evs) != 0 {
		t.Fatalf("repeat: cached %d, events %+v; want 3, none", cached, evs)
	}

	longer := append(slices.Clone(prompt[:12]), seqTokens(100, 8)...)
	cached, evs = c.Serve(longer)
	if cached != 3 || len(evs) != 1 || !evs[0].HasParent || evs[0].Parent != st.Hashes[2] || len(evs[0].Hashes) != 2 {
		t.Fatalf("continuation: cached %d, events %+v", cached, evs)
	}
	if !slices.Equal(evs[0].Tokens, seqTokens(100, 8)) {
		t.Fatalf("continuation tokens %v", evs[0].Tokens)
	}
	if c.Len() != 5 {
		t.Fatalf("Len = %d, want 5", c.Len())
	}
}

func TestCacheHashesChainAndNamespace(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 2, CapacityBlocks: 8})
	a := c.Hashes(Request{Tokens: []uint32{1, 2, 3, 4}}, -1)
	b := c.Hashes(Request{Tokens: []uint32{9, 9, 3, 4}}, -1)
	if a[1] == b[1] {
		t.Error("equal second blocks under different first blocks hash the same")
	}
	lora := c.Hashes(Request{Tokens: []uint32{1, 2, 3, 4}, LoraName: "x"}, -1)
	salt := c.Hashes(Request{Tokens: []uint32{1, 2, 3, 4}, CacheSalt: "x"}, -1)
	if lora[0] == a[0] || salt[0] == a[0] || lora[0] == salt[0] {
		t.Error("namespaces share a block hash")
	}
	other := mustCache(t, Config{BlockSize: 2, CapacityBlocks: 8, HashSeed: 7})
	if other.Hashes(Request{Tokens: []uint32{1, 2}}, -1)[0] == a[0] {
		t.Error("different hash seeds give the same hash")
	}
}

func TestCacheEvictsLeastRecentlyUsedLeaf(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 1, CapacityBlocks: 4})
	m := newModel(t, 1)
	serve := func(tokens ...uint32) []Event {
		_, evs := c.Serve(tokens)
		m.apply(evs)
		return evs
	}
	a := c.Hashes(Request{Tokens: []uint32{1, 2, 3}}, -1) // chain 1→2→3
	serve(1, 2, 3)
	b := c.Hashes(Request{Tokens: []uint32{7}}, -1)
	serve(7)
	serve(1, 2) // use order, oldest first: 3, 7, 2, 1
	// Storing 8→9 in a full cache of 4 evicts two leaves, least recently
	// used first: 3 (last used by the first request), then 7.
	evs := serve(8, 9)
	var removed []uint64
	for _, ev := range evs {
		if ev.Kind == EventRemoved {
			removed = append(removed, ev.Hashes...)
		}
	}
	if want := []uint64{a[2], b[0]}; !slices.Equal(removed, want) {
		t.Fatalf("evicted %x, want %x (3 then 7)", removed, want)
	}
	if evs[len(evs)-1].Kind != EventStored {
		t.Fatal("BlockStored does not follow the removals")
	}
	m.equal(c.Contents())
}

func TestCacheNeverEvictsAParentBeforeItsChild(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 1, CapacityBlocks: 3})
	m := newModel(t, 1)
	_, evs := c.Serve([]uint32{1, 2, 3})
	m.apply(evs)
	_, evs = c.Serve([]uint32{1}) // the root is now the most recent, its chain the oldest
	m.apply(evs)
	_, evs = c.Serve([]uint32{5})
	m.apply(evs) // the model fails if a parent goes before its child
	root := c.Hashes(Request{Tokens: []uint32{1}}, -1)[0]
	if _, ok := c.Contents().Blocks[root]; !ok {
		t.Fatal("evicted the most recently used root")
	}
}

func TestCacheChainLongerThanCapacity(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 2, CapacityBlocks: 3})
	m := newModel(t, 2)
	_, evs := c.Serve(seqTokens(0, 20))
	m.apply(evs)
	if len(evs) != 1 || len(evs[0].Hashes) != 3 {
		t.Fatalf("events %+v; want one BlockStored of the first 3 blocks", evs)
	}
	cached, evs := c.Serve(seqTokens(0, 20))
	if cached != 3 || len(evs) != 0 {
		t.Fatalf("repeat: cached %d, %d events; want 3, 0", cached, len(evs))
	}
	_, evs = c.Serve(seqTokens(50, 20))
	m.apply(evs)
	m.equal(c.Contents())
}

func TestCacheClear(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 2, CapacityBlocks: 8, DpRank: 3})
	c.Serve(seqTokens(0, 8))
	evs := c.Clear()
	if len(evs) != 1 || evs[0].Kind != EventCleared {
		t.Fatalf("Clear events %+v", evs)
	}
	if s := c.Contents(); len(s.Blocks) != 0 || s.DpRank != 3 {
		t.Fatalf("after Clear: %+v", s)
	}
	if cached, _ := c.Serve(seqTokens(0, 8)); cached != 0 {
		t.Fatalf("cached %d after Clear", cached)
	}
}

func TestCacheContentsIsACopy(t *testing.T) {
	c := mustCache(t, Config{BlockSize: 2, CapacityBlocks: 8})
	_, evs := c.Serve([]uint32{1, 2})
	evs[0].Tokens[0] = 99 // the caller owns its events
	s := c.Contents()
	for _, b := range s.Blocks {
		b.Tokens[1] = 99
	}
	for _, b := range c.Contents().Blocks {
		if !slices.Equal(b.Tokens, []uint32{1, 2}) {
			t.Fatalf("cache tokens changed through events or snapshots: %v", b.Tokens)
		}
	}
}

// TestCacheRandomizedMatchesEventReplay drives caches of several shapes with
// random requests over a small token alphabet (many shared prefixes) and
// clears; after every step the contents must equal what replaying the events
// implies, stay within capacity and stay prefix-closed.
func TestCacheRandomizedMatchesEventReplay(t *testing.T) {
	for _, shape := range []struct{ bs, capacity int }{{1, 1}, {1, 7}, {2, 16}, {4, 64}, {3, 5}} {
		rng := rand.New(rand.NewPCG(42, uint64(shape.capacity)))
		c := mustCache(t, Config{BlockSize: shape.bs, CapacityBlocks: shape.capacity})
		twin := mustCache(t, Config{BlockSize: shape.bs, CapacityBlocks: shape.capacity})
		m := newModel(t, shape.bs)
		var hits, blocks uint64
		for step := 0; step < 3000; step++ {
			var evs []Event
			if rng.IntN(200) == 0 {
				evs = c.Clear()
				if got := twin.Clear(); !slices.EqualFunc(evs, got, eventEqual) {
					t.Fatal("twin caches diverge on Clear")
				}
			} else {
				r := Request{Tokens: make([]uint32, rng.IntN(8*shape.bs))}
				for i := range r.Tokens {
					r.Tokens[i] = uint32(rng.IntN(3))
				}
				if rng.IntN(4) == 0 {
					r.LoraName = "lora-a"
				}
				if rng.IntN(5) == 0 {
					r.SessionID = "s"
				}
				var cached int
				cached, evs = c.ServeRequest(r)
				twinCached, twinEvs := twin.ServeRequest(r)
				if cached != twinCached || !slices.EqualFunc(evs, twinEvs, eventEqual) {
					t.Fatalf("step %d: twin caches diverge", step)
				}
				hits += uint64(cached)
				blocks += uint64(len(r.Tokens) / shape.bs)
			}
			m.apply(evs)
			s := c.Contents()
			m.equal(s)
			if len(s.Blocks) > shape.capacity {
				t.Fatalf("step %d: %d blocks over capacity %d", step, len(s.Blocks), shape.capacity)
			}
			for _, b := range s.Blocks {
				if _, ok := s.Blocks[b.Parent]; b.HasParent && !ok {
					t.Fatalf("step %d: block %#x held without its parent", step, b.Hash)
				}
			}
		}
		if st := c.Stats(); st.HitBlocks != hits || st.PromptBlocks != blocks || st.EvictedBlocks == 0 && shape.capacity < 16 {
			t.Fatalf("shape %+v: stats %+v (hits %d, blocks %d)", shape, st, hits, blocks)
		}
	}
}

func eventEqual(a, b Event) bool {
	return a.Kind == b.Kind && slices.Equal(a.Hashes, b.Hashes) && a.Parent == b.Parent && a.HasParent == b.HasParent &&
		slices.Equal(a.Tokens, b.Tokens) && a.BlockSize == b.BlockSize && a.Medium == b.Medium &&
		a.LoraName == b.LoraName && a.CacheSalt == b.CacheSalt && a.SessionID == b.SessionID
}

func BenchmarkCacheServe(b *testing.B) {
	c, _ := NewCache(Config{BlockSize: 16, CapacityBlocks: 4096})
	d, _ := NewRandomDriver(RandomConfig{Seed: 1, Prefixes: 64, MaxPrefixBlocks: 64})
	prompts := make([][]uint32, 1024)
	for i := range prompts {
		p, _ := d.Next()
		prompts[i] = p.Tokens
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Serve(prompts[i%len(prompts)])
	}
}
