package wire

// Hints (hint.go, README.md "Bad input"): an unusable optional field that
// does not decide which blocks, namespace or tier an event describes is
// dropped and recorded; the event is kept with all its blocks. Same table
// format as conformance_test.go.

import (
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// withDropped returns w with the given hints recorded as dropped.
func withDropped(w Event, hints ...Hint) Event {
	for _, h := range hints {
		w.Dropped = w.Dropped.With(h)
	}
	return w
}

func fmtHints(s Hints) string {
	var names []string
	for h := Hint(0); h < HintCount; h++ {
		if s.Has(h) {
			names = append(names, h.Reason())
		}
	}
	return "{" + strings.Join(names, ",") + "}"
}

func hintCases() []conformanceCase {
	sess100k := strings.Repeat("c", 100_000) // the 100 kB session id, 25× the 4,096-byte cap
	base := okStoredWant
	return []conformanceCase{
		{
			name: "hint/positional session_id of 100 kB at 14: dropped, blocks kept",
			payload: sandwich(storedWithTail(10, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Str(sess100k)
			})),
			want: sandwiched(withDropped(base, HintSessionID)),
		},
		{
			name:    "hint/map session_id of 100 kB: dropped, blocks kept",
			payload: sandwich(mapStoredWith("session_id", func(b *wirefix.B) { b.Str(sess100k) })),
			want:    sandwiched(withDropped(base, HintSessionID)),
		},
		{
			name:    "hint/map session_id is an int: dropped",
			payload: sandwich(mapStoredWith("session_id", func(b *wirefix.B) { b.Uint(5, 0) })),
			want:    sandwiched(withDropped(base, HintSessionID)),
		},
		{
			name: "hint/SGLang metadata at 7: session_id dropped, cache_salt kept",
			payload: sandwich(storedWithTail(3, func(b *wirefix.B) {
				b.Nil().Nil().Map(2).Str("session_id").Array(1).Nil().Str("cache_salt").Str("s1")
			})),
			want: sandwiched(withDropped(func() Event { e := base; e.CacheSalt = "s1"; return e }(), HintSessionID)),
		},
		{
			name: "hint/SGLang metadata at 14: over-cap session_id dropped",
			payload: sandwich(storedWithTail(10, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Map(1).Str("session_id").Str(sess100k)
			})),
			want: sandwiched(withDropped(base, HintSessionID)),
		},
		{
			name:    "hint/positional lora_id is a string: dropped",
			payload: sandwich(storedWithTail(1, func(b *wirefix.B) { b.Str("7") })),
			want:    sandwiched(withDropped(base, HintLoraID)),
		},
		{
			name: "hint/positional negative sliding window: dropped, kind and group kept",
			payload: sandwich(storedWithTail(7, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Uint(0, 0).Str("full_attention").Int(-5, 0)
			})),
			want: sandwiched(withDropped(func() Event {
				e := base
				e.GroupIdx, e.Kind = i64(0), "full_attention"
				return e
			}(), HintSlidingWindow)),
		},
		{
			name:    "hint/map sliding window is a string: dropped",
			payload: sandwich(mapStoredWith("kv_cache_spec_sliding_window", func(b *wirefix.B) { b.Str("4096") })),
			want:    sandwiched(withDropped(base, HintSlidingWindow)),
		},
		{
			name:    "hint/map sliding window negative: dropped",
			payload: sandwich(mapStoredWith("kv_cache_spec_sliding_window", func(b *wirefix.B) { b.Int(-1, 0) })),
			want:    sandwiched(withDropped(base, HintSlidingWindow)),
		},
		{
			name:    "hint/map ownership is an int: dropped",
			payload: sandwich(mapStoredWith("ownership", func(b *wirefix.B) { b.Uint(3, 0) })),
			want:    sandwiched(withDropped(base, HintOwnership)),
		},
		{
			name: "hint/positional ownership of 5 kB at 13: dropped",
			payload: sandwich(storedWithTail(9, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Str(strings.Repeat("o", 5000))
			})),
			want: sandwiched(withDropped(base, HintOwnership)),
		},
		{
			name: "hint/removed: map ownership of 5 kB dropped, hashes kept",
			payload: sandwich(func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(7).Str("ownership").Str(strings.Repeat("o", 5000))
			}),
			want: sandwiched(withDropped(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(7)}, HintOwnership)),
		},
		{
			name: "hint/several bad hints in one event: each recorded",
			payload: sandwich(func(b *wirefix.B) {
				b.Map(7).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).
					Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0).
					Str("session_id").Str(sess100k).Str("ownership").F64(1).Str("lora_id").Str("x")
			}),
			want: sandwiched(withDropped(base, HintSessionID, HintOwnership, HintLoraID)),
		},
		{
			name: "hint/event_version and unknown keys of any shape are skipped unread",
			payload: sandwich(func(b *wirefix.B) {
				b.Map(7).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).
					Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0).
					Str("event_version").Str("v-"+strings.Repeat("9", 5000)).
					Str("future_field").Map(1).Str("k").Array(2).Nil().Bin([]byte{1}).
					Str(strings.Repeat("k", 5000)).Uint(1, 0)
			}),
			want: sandwiched(base),
		},
		{
			name:    "hint/batch ts is a string: dropped, events kept",
			payload: build(func(b *wirefix.B) { b.Array(3).Str("now"); b.Array(1); neighbourA(b); b.Uint(0, 0) }),
			want:    Batch{DpRank: i64(0), Dropped: Hints(0).With(HintTimestamp), Events: []Event{neighbourAWant}},
		},
		// The fields that decide which blocks, namespace or tier still reject.
		malformedCase("hint/not a hint: map lora_name of 5 kB rejects (namespace)",
			mapStoredWith("lora_name", func(b *wirefix.B) { b.Str(strings.Repeat("l", 5000)) }),
			"BlockStored", TypeStored, messages.ReasonLimitExceeded),
		malformedCase("hint/not a hint: map cache_salt is an int rejects (namespace)",
			mapStoredWith("cache_salt", func(b *wirefix.B) { b.Uint(1, 0) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hint/not a hint: map medium of 5 kB rejects (tier)",
			mapStoredWith("medium", func(b *wirefix.B) { b.Str(strings.Repeat("m", 5000)) }),
			"BlockStored", TypeStored, messages.ReasonLimitExceeded),
		malformedCase("hint/not a hint: map group_idx negative rejects (group)",
			mapStoredWith("group_idx", func(b *wirefix.B) { b.Int(-1, 0) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hint/not a hint: map kind of 5 kB rejects (group)",
			mapStoredWith("kv_cache_spec_kind", func(b *wirefix.B) { b.Str(strings.Repeat("k", 5000)) }),
			"BlockStored", TypeStored, messages.ReasonLimitExceeded),
	}
}

func TestHintReasonsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for h := Hint(0); h < HintCount; h++ {
		r := h.Reason()
		if !strings.HasPrefix(r, "invalid_") || seen[r] {
			t.Errorf("hint %d has reason %q (want a distinct invalid_* label)", h, r)
		}
		seen[r] = true
	}
}
