package radix

import (
	"math/rand/v2"
	"runtime"
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// corpus is a synthetic index shaped like a chat workload: a few shared
// system prompts (Zipf popularity) and many conversations below them, each
// held by 1 worker (60 %), 2 (25 %) or 3–8 (15 %). Every worker has its own
// engine-hash seed, like independent engines.
type corpus struct {
	prompts [][]messages.LocalHash
	convs   []conv
	workers int
}

type conv struct {
	prompt  int
	tail    []messages.LocalHash
	holders []messages.WorkerKey
}

const promptBlocks = 16

// newCorpus builds about blocks distinct blocks held by workers workers.
func newCorpus(blocks, workers int, seed uint64) *corpus {
	r := rand.New(rand.NewPCG(seed, 7))
	c := &corpus{workers: workers}
	for range 50 {
		p := make([]messages.LocalHash, promptBlocks)
		for i := range p {
			p[i] = messages.LocalHash(r.Uint64())
		}
		c.prompts = append(c.prompts, p)
	}
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(c.prompts)-1))
	for n := len(c.prompts) * promptBlocks; n < blocks; {
		cv := conv{prompt: int(zipf.Uint64()), tail: make([]messages.LocalHash, 32+r.IntN(129))}
		for i := range cv.tail {
			cv.tail[i] = messages.LocalHash(r.Uint64())
		}
		k := 1
		switch p := r.IntN(100); {
		case p >= 85:
			k = 3 + r.IntN(6)
		case p >= 60:
			k = 2
		}
		for len(cv.holders) < k {
			w := messages.WorkerKey{Worker: messages.WorkerID(r.IntN(workers))}
			if !slices.Contains(cv.holders, w) {
				cv.holders = append(cv.holders, w)
			}
		}
		n += len(cv.tail)
		c.convs = append(c.convs, cv)
	}
	return c
}

// events returns the Stored events that build the corpus (≤ 128 blocks
// each, dense ids per stream).
func (c *corpus) events() []messages.RouterEvent {
	var out []messages.RouterEvent
	ids := map[messages.WorkerKey]uint64{}
	for _, cv := range c.convs {
		full := append(append([]messages.LocalHash(nil), c.prompts[cv.prompt]...), cv.tail...)
		for _, k := range cv.holders {
			var parent messages.ExternalHash
			for i := 0; i < len(full); i += DumpMaxBlocks {
				ids[k]++
				ev := messages.RouterEvent{WorkerID: k.Worker, Event: messages.KvCacheEvent{
					EventID: ids[k], Kind: messages.KindStored, HasParent: i > 0, ParentHash: parent}}
				for _, l := range full[i:min(i+DumpMaxBlocks, len(full))] {
					parent = messages.ExternalHash(mix(uint64(k.Worker)*0x9e3779b97f4a7c15 ^ mix(uint64(parent)^uint64(l))))
					ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: parent, TokensHash: l})
				}
				out = append(out, ev)
			}
		}
	}
	return out
}

// queries returns n 64-block queries: a conversation's prompt and the first
// 48 blocks of its tail.
func (c *corpus) queries(n int, seed uint64) [][]messages.LocalHash {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([][]messages.LocalHash, n)
	for i := range out {
		cv := c.convs[r.IntN(len(c.convs))]
		q := append(append([]messages.LocalHash(nil), c.prompts[cv.prompt]...), cv.tail...)
		out[i] = q[:min(64, len(q))]
	}
	return out
}

// build applies the corpus to a new tree and measures the heap it took.
func (c *corpus) build(evs []messages.RouterEvent) (tr *Tree, heap uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr = New(Config{})
	for _, ev := range evs {
		tr.Apply(ev)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(evs)
	return tr, after.HeapAlloc - before.HeapAlloc
}
