package wire

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// removedCopies encodes newer vLLM's BlockRemoved (its kv_events.py and
// tests: map form, locality and remaining_copy_counts after medium)
// with counts written by c.
func removedCopies(hashes []uint64, c enc) enc {
	return func(b *wirefix.B) {
		b.Map(5).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(hashes...).
			Str("medium").Str("GPU").Str("locality").Str("REMOTE").Str("remaining_copy_counts")
		c(b)
	}
}

func removedCopiesWant(copies []uint32, dropped Hints) Event {
	return Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(0xC1, 0xC2), Medium: "GPU",
		Locality: "REMOTE", RemainingCopies: copies, Dropped: dropped}
}

// remaining_copy_counts is read as one count per removed hash; any
// unusable value is dropped as a hint and the event kept (the removal then
// applies whole), and its neighbours decode as ever.
func TestConformanceRemainingCopies(t *testing.T) {
	none := Hints(0)
	drop := none.With(HintRemainingCopies)
	two := []uint64{0xC1, 0xC2}
	runCases(t, []conformanceCase{
		{name: "copies/two counts", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Uints(2, 0) })),
			want: sandwiched(removedCopiesWant([]uint32{2, 0}, none))},
		{name: "copies/nil", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Nil() })),
			want: sandwiched(removedCopiesWant(nil, none))},
		{name: "copies/wide encodings", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Array(2).Uint(7, 32).Int(0, 64) })),
			want: sandwiched(removedCopiesWant([]uint32{7, 0}, none))},
		{name: "copies/one count for two hashes", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Uints(1) })),
			want: sandwiched(removedCopiesWant(nil, drop))},
		{name: "copies/negative", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Array(2).Int(-1, 8).Uint(0, 0) })),
			want: sandwiched(removedCopiesWant(nil, drop))},
		{name: "copies/a string", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Array(2).Uint(1, 0).Str("1") })),
			want: sandwiched(removedCopiesWant(nil, drop))},
		{name: "copies/nil element", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Array(2).Nil().Uint(1, 0) })),
			want: sandwiched(removedCopiesWant(nil, drop))},
		{name: "copies/not an array", payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Map(0) })),
			want: sandwiched(removedCopiesWant(nil, drop))},
		{name: "copies/over the hash cap", lim: Limits{MaxHashes: 2},
			payload: sandwich(removedCopies(two, func(b *wirefix.B) { b.Uints(1, 1, 1) })),
			want:    sandwiched(removedCopiesWant(nil, drop))},
	})
}
