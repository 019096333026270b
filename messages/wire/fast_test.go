package wire

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// TestTokenEncodings decodes token arrays whose ids take every integer
// encoding that can hold them, mixed at random, with the array at the very
// end of the payload (fastTokens' last bytes go through intAt) and inside
// it; an id that is negative or above 2^32-1 rejects the event wherever it
// sits.
func TestTokenEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	encode := func(b *wirefix.B, v uint32) {
		switch r := rng.IntN(6); {
		case r == 0 && v < 0x80:
			b.Raw(byte(v))
		case r <= 1 && v <= 0xff:
			b.Uint(uint64(v), 8)
		case r <= 2 && v <= 0xffff:
			b.Uint(uint64(v), 16)
		case r <= 3:
			b.Uint(uint64(v), 32)
		case r <= 4:
			b.Uint(uint64(v), 64)
		default:
			b.Int(int64(v), 64)
		}
	}
	dec := NewDecoder(DefaultLimits(), nil)
	for trial := range 2000 {
		n := rng.IntN(40)
		want := make([]uint32, n)
		for i := range want {
			switch rng.IntN(4) {
			case 0:
				want[i] = rng.Uint32N(0x80)
			case 1:
				want[i] = rng.Uint32N(0x10000)
			case 2:
				want[i] = rng.Uint32N(151936)
			default:
				want[i] = rng.Uint32()
			}
		}
		bad := -1
		if n > 0 && trial%4 == 0 {
			bad = rng.IntN(n)
		}
		last := trial%2 == 0 // token_ids ends the payload
		b := wirefix.New().Array(2).F64(1).Array(1).Map(4).
			Str("type").Str("BlockStored").Str("block_size").Uint(16, 0)
		if last {
			b.Str("block_hashes").Uints(7)
		}
		b.Str("token_ids").Array(n)
		for i, v := range want {
			switch {
			case i != bad:
				encode(b, v)
			case trial%8 == 0:
				b.Int(-1-int64(rng.IntN(100)), []int{0, 8, 16, 32, 64}[rng.IntN(5)])
			default:
				b.Uint(1<<32+uint64(v), 64)
			}
		}
		if !last {
			b.Str("block_hashes").Uints(7)
		}
		batch, err := dec.Decode(b.Bytes())
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		ev := batch.Events[0]
		if bad >= 0 {
			if ev.Reason == messages.ReasonNone {
				t.Fatalf("trial %d: token %d of %d is out of range, event accepted", trial, bad, n)
			}
			continue
		}
		if ev.Reason != messages.ReasonNone || !slices.Equal(ev.Tokens, want) {
			t.Fatalf("trial %d: tokens %v (%v %s), want %v", trial, ev.Tokens, ev.Reason, ev.Detail, want)
		}
	}
}
