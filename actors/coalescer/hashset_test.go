package coalescer

import (
	"math/rand/v2"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestHashSetModel drives a hashSet and a Go map with the same random
// inserts, removes and lookups over a small key space (long probe runs,
// removes in the middle of them, hash 0) and checks every answer.
func TestHashSetModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var s hashSet
		model := map[messages.ExternalHash]bool{}
		space := 1 + rng.IntN(2000)
		for op := 0; op < 20000; op++ {
			h := messages.ExternalHash(rng.IntN(space))
			switch rng.IntN(3) {
			case 0:
				if got, want := s.insert(h), !model[h]; got != want {
					t.Fatalf("seed %d op %d: insert(%d) = %v, want %v", seed, op, h, got, want)
				}
				model[h] = true
			case 1:
				s.remove(h)
				delete(model, h)
			default:
				if got := s.has(h); got != model[h] {
					t.Fatalf("seed %d op %d: has(%d) = %v, want %v", seed, op, h, got, model[h])
				}
			}
			if s.len() != len(model) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, s.len(), len(model))
			}
		}
		for h := range model {
			if !s.has(h) {
				t.Fatalf("seed %d: lost %d", seed, h)
			}
		}
	}
}
