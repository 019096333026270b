package hashtab

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestMapModel drives a Map and a Go map with the same random puts,
// deletes, lookups and filtered rebuilds over a small key space (long probe
// runs, deletes in the middle of them, key 0) and checks every answer.
func TestMapModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var m Map[uint64, uint32]
		model := map[uint64]uint32{}
		space := 1 + rng.IntN(2000)
		for op := 0; op < 20000; op++ {
			k := uint64(rng.IntN(space))
			switch r := rng.IntN(100); {
			case r < 40:
				v := rng.Uint32()
				_, had := model[k]
				if added := m.Put(k, v); added == had {
					t.Fatalf("seed %d op %d: Put(%d) = %v, want %v", seed, op, k, added, !had)
				}
				model[k] = v
			case r < 55:
				v, added := m.Upsert(k)
				want, had := model[k]
				if added == had || *v != want {
					t.Fatalf("seed %d op %d: Upsert(%d) = %d, %v, want %d, %v", seed, op, k, *v, added, want, !had)
				}
				*v = rng.Uint32()
				model[k] = *v
			case r < 70:
				m.Delete(k)
				delete(model, k)
			case r < 99:
				v, ok := m.Get(k)
				if want, had := model[k]; ok != had || v != want || m.Has(k) != had {
					t.Fatalf("seed %d op %d: Get(%d) = %d, %v, want %d, %v", seed, op, k, v, ok, want, had)
				}
			case r == 99 && op%7 == 0:
				m.Clear()
				clear(model)
			default:
				odd := func(k uint64, v uint32) bool { return (k^uint64(v))&1 == 1 }
				m.DeleteFunc(odd)
				for k, v := range model {
					if odd(k, v) {
						delete(model, k)
					}
				}
			}
			if m.Len() != len(model) {
				t.Fatalf("seed %d op %d: Len %d, want %d", seed, op, m.Len(), len(model))
			}
		}
		seen := map[uint64]uint32{}
		for k, v := range m.All() {
			if _, dup := seen[k]; dup {
				t.Fatalf("seed %d: All yields %d twice", seed, k)
			}
			seen[k] = v
		}
		if len(seen) != len(model) {
			t.Fatalf("seed %d: All yields %d keys, want %d", seed, len(seen), len(model))
		}
		for k, v := range model {
			if seen[k] != v {
				t.Fatalf("seed %d: All gives %d → %d, want %d", seed, k, seen[k], v)
			}
		}
	}
}

// TestFillsToSevenEighths: a table doubles only when a key would pass 7/8
// of its slots, so past the fourfold sizes half its slots could not hold
// its keys.
func TestFillsToSevenEighths(t *testing.T) {
	var m Map[uint64, struct{}]
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 20000; n++ {
		m.Put(rng.Uint64()|1, struct{}{})
		size := len(m.slots)
		if full(n, size) || (size > 4*quadrupleBelow && !full(n, size/2)) {
			t.Fatalf("%d keys in %d slots", n, size)
		}
	}
}

// TestSetSlot checks that a set (zero-size values) takes 8-byte slots.
func TestSetSlot(t *testing.T) {
	if n := unsafe.Sizeof(slot[uint64, struct{}]{}); n != 8 {
		t.Errorf("set slot is %d bytes, want 8", n)
	}
}

// BenchmarkGrow doubles a map of 2^20 slots at its fullest (7/8): the
// rehash every doubling pays for what the map holds (bench/README.md, "Wire
// path against its floor").
func BenchmarkGrow(b *testing.B) {
	var full Map[uint64, uint64]
	rng := rand.New(rand.NewPCG(1, 2))
	for full.Len() < 7<<17 {
		k := rng.Uint64()
		full.Put(k, k)
	}
	for range b.N {
		m := full
		m.grow()
		if m.Len() != full.Len() {
			b.Fatalf("grown map holds %d keys, want %d", m.Len(), full.Len())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*full.Len()), "ns/key")
}
