package loadgen

import (
	"slices"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// holders maps block hashes to the workers holding them. Fed with the
// engines' KV events it is an exact index (what kvrouter, Dynamo and
// llm-d's precise scorer see); fed with the router's own decisions (Add
// of each routed request's chain) it is the approximate tree SGLang and
// AIBrix keep.
type holders struct {
	by    map[uint64][]int32
	size  []int // blocks held per worker
	depth []int // scratch: matched prefix per worker
	hit   []int // scratch: workers with depth > 0
}

func newHolders(workers int) *holders {
	return &holders{by: map[uint64][]int32{}, size: make([]int, workers), depth: make([]int, workers)}
}

// Add records that worker w holds hashes.
func (h *holders) Add(w int, hashes []uint64) {
	for _, x := range hashes {
		if !slices.Contains(h.by[x], int32(w)) {
			h.by[x] = append(h.by[x], int32(w))
			h.size[w]++
		}
	}
}

// record adds chain to worker w's blocks and returns w: a policy that
// tracks its own decisions records each one.
func (h *holders) record(w int, chain []uint64) int {
	h.Add(w, chain)
	return w
}

// Remove records that worker w no longer holds hashes.
func (h *holders) Remove(w int, hashes []uint64) {
	for _, x := range hashes {
		hs := h.by[x]
		i := slices.Index(hs, int32(w))
		if i < 0 {
			continue
		}
		h.size[w]--
		if hs = slices.Delete(hs, i, i+1); len(hs) == 0 {
			delete(h.by, x)
		} else {
			h.by[x] = hs
		}
	}
}

// Apply follows one worker's cache events.
func (h *holders) Apply(w int, events []simengine.Event) {
	for _, ev := range events {
		switch ev.Kind {
		case simengine.EventStored:
			h.Add(w, ev.Hashes)
		case simengine.EventRemoved:
			h.Remove(w, ev.Hashes)
		case simengine.EventCleared:
			var all []uint64
			for x, hs := range h.by {
				if slices.Contains(hs, int32(w)) {
					all = append(all, x)
				}
			}
			h.Remove(w, all)
		}
	}
}

// Match returns, for each worker, how many leading blocks of chain it
// holds (valid until the next Match), and the workers holding at least
// one, sorted.
func (h *holders) Match(chain []uint64) (depth []int, hit []int) {
	for _, w := range h.hit {
		h.depth[w] = 0
	}
	h.hit = h.hit[:0]
	for d, x := range chain {
		grew := false
		for _, w := range h.by[x] {
			if h.depth[w] == d {
				h.depth[w] = d + 1
				grew = true
				if d == 0 {
					h.hit = append(h.hit, int(w))
				}
			}
		}
		if !grew {
			break
		}
	}
	slices.Sort(h.hit)
	return h.depth, h.hit
}
