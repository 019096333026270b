package simengine

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// EventKind is the kind of a cache Event.
type EventKind uint8

// Event kinds, one per wire tag.
const (
	EventStored  EventKind = iota + 1 // BlockStored
	EventRemoved                      // BlockRemoved
	EventCleared                      // AllBlocksCleared
)

var eventKindNames = [...]string{"", "BlockStored", "BlockRemoved", "AllBlocksCleared"}

// String returns the event's wire tag.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && k != 0 {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one cache change as an engine reports it, before encoding.
type Event struct {
	Kind EventKind
	// Hashes are the engine block hashes: for EventStored the new blocks in
	// chain order, for EventRemoved the evicted blocks.
	Hashes []uint64
	// Parent is the engine hash the stored chain continues (HasParent false
	// for a chain that starts at the root).
	Parent    uint64
	HasParent bool
	// Tokens are the stored blocks' tokens, len(Hashes)×BlockSize.
	Tokens    []uint32
	BlockSize int
	Medium    string
	LoraName  string
	CacheSalt string
	SessionID string // stored events only; "" when the request had none
}

// Request is one prompt to serve.
type Request struct {
	Tokens []uint32
	// SessionID is reported on the BlockStored event the request causes.
	SessionID string
	// LoraName and CacheSalt select the cache namespace: they change every
	// engine hash of the chain and travel on the wire.
	LoraName  string
	CacheSalt string
}

// Config sizes a Cache.
type Config struct {
	BlockSize      int    // tokens per block, > 0
	CapacityBlocks int    // blocks held at most, > 0
	DpRank         uint32 // the data-parallel rank this cache belongs to
	Medium         string // the medium events report; "" means "GPU"
	// HashSeed seeds the engine hash chain (vLLM's NONE_HASH). Caches with
	// equal seeds give equal prefixes equal hashes.
	HashSeed uint64
}

// Block is one cached block: ground truth for index checks.
type Block struct {
	Hash      uint64
	Parent    uint64
	HasParent bool
	Tokens    []uint32
	LoraName  string
	CacheSalt string
}

// Snapshot is what one dp rank's cache holds, keyed by engine hash.
type Snapshot struct {
	DpRank uint32
	Blocks map[uint64]Block
}

// Held returns the engine hashes the cache holds, sorted: the ground truth
// a router's index of this engine is checked against.
func (s Snapshot) Held() []messages.ExternalHash {
	hs := make([]messages.ExternalHash, 0, len(s.Blocks))
	for h := range s.Blocks {
		hs = append(hs, messages.ExternalHash(h))
	}
	slices.Sort(hs)
	return hs
}

// CacheStats counts what a Cache has done since it was created.
type CacheStats struct {
	Requests      uint64
	PromptBlocks  uint64 // complete blocks in served prompts
	HitBlocks     uint64 // of those, already cached
	StoredBlocks  uint64
	EvictedBlocks uint64
	Clears        uint64
}

// Cache is a finite prefix cache of token blocks with LRU eviction of leaf
// blocks (see the package doc for the rule). It is deterministic and not
// safe for concurrent use.
type Cache struct {
	cfg    Config
	blocks map[uint64]*node
	lru    lruList
	stats  CacheStats
	hashes []uint64 // scratch for one request's chain
	buf    []byte   // scratch for hashing
}

// NewCache returns an empty cache, or an error if cfg is unusable.
func NewCache(cfg Config) (*Cache, error) {
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("simengine: block size %d, want > 0", cfg.BlockSize)
	}
	if cfg.CapacityBlocks <= 0 {
		return nil, fmt.Errorf("simengine: capacity %d blocks, want > 0", cfg.CapacityBlocks)
	}
	if cfg.Medium == "" {
		cfg.Medium = "GPU"
	}
	c := &Cache{cfg: cfg, blocks: make(map[uint64]*node)}
	c.lru.init()
	return c, nil
}

// Config returns the cache's configuration (with defaults filled in).
func (c *Cache) Config() Config { return c.cfg }

// Len returns the number of blocks held.
func (c *Cache) Len() int { return len(c.blocks) }

// Stats returns the counters so far.
func (c *Cache) Stats() CacheStats { return c.stats }

// Serve serves a request without session, LoRA or salt; see ServeRequest.
func (c *Cache) Serve(tokens []uint32) (cachedBlocks int, events []Event) {
	return c.ServeRequest(Request{Tokens: tokens})
}

// ServeRequest looks the request's complete blocks up, marks the cached
// prefix as used, and stores the rest, evicting least recently used leaves
// to make room. It returns how many leading blocks were already cached and
// the events, in order: one BlockRemoved per evicted block (as vLLM emits
// them), then one BlockStored for the chain continuation, if any. A trailing
// partial block is not cached.
func (c *Cache) ServeRequest(r Request) (cachedBlocks int, events []Event) {
	bs, capacity := c.cfg.BlockSize, c.cfg.CapacityBlocks
	complete := len(r.Tokens) / bs
	c.stats.Requests++
	c.stats.PromptBlocks += uint64(complete)
	n := min(complete, capacity)
	c.hashes = c.chain(c.hashes[:0], r, n)
	p := 0
	for p < n {
		if _, ok := c.blocks[c.hashes[p]]; !ok {
			break
		}
		p++
	}
	c.stats.HitBlocks += uint64(p)
	for i := p - 1; i >= 0; i-- { // chain order at the front: parents before children
		c.lru.moveToFront(c.blocks[c.hashes[i]])
	}
	if p == n {
		return p, nil
	}
	for need := len(c.blocks) + (n - p) - capacity; need > 0; need-- {
		h, ok := c.evict()
		if !ok {
			break // unreachable: n ≤ capacity leaves enough non-prefix leaves
		}
		events = append(events, Event{Kind: EventRemoved, Hashes: []uint64{h}, Medium: c.cfg.Medium})
	}
	stored := Event{
		Kind:      EventStored,
		Hashes:    append([]uint64(nil), c.hashes[p:n]...),
		Tokens:    append([]uint32(nil), r.Tokens[p*bs:n*bs]...),
		BlockSize: bs,
		Medium:    c.cfg.Medium,
		LoraName:  r.LoraName,
		CacheSalt: r.CacheSalt,
		SessionID: r.SessionID,
	}
	var mark *node
	if p > 0 {
		mark = c.blocks[c.hashes[p-1]]
		stored.Parent, stored.HasParent = mark.Hash, true
	}
	own := append([]uint32(nil), stored.Tokens...) // the cache's copy, apart from the event's
	for i := p; i < n; i++ {
		nd := &node{Block: Block{
			Hash:      c.hashes[i],
			Tokens:    own[(i-p)*bs : (i-p+1)*bs : (i-p+1)*bs],
			LoraName:  r.LoraName,
			CacheSalt: r.CacheSalt,
		}}
		if mark != nil {
			nd.Parent, nd.HasParent = mark.Hash, true
			mark.children++
		}
		c.blocks[nd.Hash] = nd
		c.lru.insertAfter(mark, nd)
		mark = nd
	}
	c.stats.StoredBlocks += uint64(n - p)
	return p, append(events, stored)
}

// evict drops the least recently used leaf. By the list invariant that is
// the tail; the scan towards the front only guards the invariant.
func (c *Cache) evict() (uint64, bool) {
	for nd := c.lru.back(); nd != nil; nd = c.lru.prevOf(nd) {
		if nd.children > 0 {
			continue
		}
		c.lru.remove(nd)
		delete(c.blocks, nd.Hash)
		if nd.HasParent {
			if parent, ok := c.blocks[nd.Parent]; ok {
				parent.children--
			}
		}
		c.stats.EvictedBlocks++
		return nd.Hash, true
	}
	return 0, false
}

// Clear drops every block and returns the AllBlocksCleared event.
func (c *Cache) Clear() []Event {
	clear(c.blocks)
	c.lru.init()
	c.stats.Clears++
	return []Event{{Kind: EventCleared}}
}

// Contents returns a copy of what the cache holds.
func (c *Cache) Contents() Snapshot {
	s := Snapshot{DpRank: c.cfg.DpRank, Blocks: make(map[uint64]Block, len(c.blocks))}
	for h, nd := range c.blocks {
		b := nd.Block
		b.Tokens = append([]uint32(nil), b.Tokens...)
		s.Blocks[h] = b
	}
	return s
}

// Hashes returns the engine hashes of the first blocks complete blocks of r
// (all of them when blocks < 0), as ServeRequest would compute them.
func (c *Cache) Hashes(r Request, blocks int) []uint64 {
	n := len(r.Tokens) / c.cfg.BlockSize
	if blocks >= 0 {
		n = min(n, blocks)
	}
	return c.chain(nil, r, n)
}

// chain appends the engine hashes of r's first n blocks to dst.
func (c *Cache) chain(dst []uint64, r Request, n int) []uint64 {
	bs := c.cfg.BlockSize
	parent := c.root(r.LoraName, r.CacheSalt)
	for i := 0; i < n; i++ {
		c.buf = binary.LittleEndian.AppendUint64(c.buf[:0], parent)
		for _, t := range r.Tokens[i*bs : (i+1)*bs] {
			c.buf = binary.LittleEndian.AppendUint32(c.buf, t)
		}
		parent = xxh3.HashSeed(c.buf, c.cfg.HashSeed)
		dst = append(dst, parent)
	}
	return dst
}

// root is the chain's starting value for a namespace; length prefixes keep
// ("ab","c") and ("a","bc") apart.
func (c *Cache) root(lora, salt string) uint64 {
	c.buf = append(c.buf[:0], rootPrefix...)
	c.buf = binary.LittleEndian.AppendUint32(c.buf, uint32(len(lora)))
	c.buf = append(c.buf, lora...)
	c.buf = binary.LittleEndian.AppendUint32(c.buf, uint32(len(salt)))
	c.buf = append(c.buf, salt...)
	return xxh3.HashSeed(c.buf, c.cfg.HashSeed)
}

const rootPrefix = "simengine-root-v1"
