package prompttokens

import (
	"container/list"
	"sync"

	"github.com/zeebo/xxh3"
)

// cacheKey is a 128-bit hash of what was asked of the engine: the model,
// the request's kind and its template inputs, byte for byte.
type cacheKey = xxh3.Uint128

// idCache holds engines' answers, least recently used first out, bounded
// by the bytes of the ids it holds plus a fixed cost per entry.
type idCache struct {
	mu       sync.Mutex
	max, cur int
	ll       *list.List // of *cacheEntry, most recent first
	byKey    map[cacheKey]*list.Element
}

type cacheEntry struct {
	key cacheKey
	ids []uint32
}

// entryOverhead approximates an entry's map, list and header cost.
const entryOverhead = 128

func newIDCache(maxBytes int) *idCache {
	return &idCache{max: maxBytes, ll: list.New(), byKey: map[cacheKey]*list.Element{}}
}

func entrySize(ids []uint32) int { return 4*len(ids) + entryOverhead }

// get returns the cached ids (shared: callers must not modify them).
func (c *idCache) get(k cacheKey) ([]uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry).ids, true
}

func (c *idCache) put(k cacheKey, ids []uint32) {
	size := entrySize(ids)
	if size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.cur -= entrySize(el.Value.(*cacheEntry).ids)
		el.Value.(*cacheEntry).ids = ids
		c.cur += size
		c.ll.MoveToFront(el)
	} else {
		c.byKey[k] = c.ll.PushFront(&cacheEntry{k, ids})
		c.cur += size
	}
	for c.cur > c.max {
		last := c.ll.Back()
		e := last.Value.(*cacheEntry)
		c.ll.Remove(last)
		delete(c.byKey, e.key)
		c.cur -= entrySize(e.ids)
	}
}

// bytes is the cache's current accounted size.
func (c *idCache) bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// keyer hashes request parts into a cacheKey; each part is length-prefixed
// so that parts never run into each other.
type keyer struct{ h *xxh3.Hasher }

var keyers = sync.Pool{New: func() any { return keyer{xxh3.New()} }}

func hashKey(parts ...[]byte) cacheKey {
	k := keyers.Get().(keyer)
	k.h.Reset()
	var n [8]byte
	for _, p := range parts {
		l := len(p)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		_, _ = k.h.Write(n[:])
		_, _ = k.h.Write(p)
	}
	sum := k.h.Sum128()
	keyers.Put(k)
	return sum
}
