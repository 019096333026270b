package wire

// Limits, hostile lengths, nesting and truncation. Same table format and
// comparison rules as conformance_test.go.
// Over 500 lines on purpose: one table of cases, one per limit.

import (
	"runtime"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// smallLim keeps the caps small enough to hit with hand-written fixtures.
// MaxStringBytes 16 still fits every tag and the map keys the neighbours use.
var smallLim = Limits{MaxHashes: 4, MaxTokens: 6, MaxStringBytes: 16, MaxExtraItems: 3}

// huge is a declared length far beyond any payload (≈ 4e9).
const huge = 4_000_000_000

// array32 / map32 / str32 / bin32 write a 32-bit length header declaring n.
func array32(b *wirefix.B, n uint32) *wirefix.B { return b.Raw(0xdd).Raw(be32(n)...) }
func map32(b *wirefix.B, n uint32) *wirefix.B   { return b.Raw(0xdf).Raw(be32(n)...) }
func str32(b *wirefix.B, n uint32) *wirefix.B   { return b.Raw(0xdb).Raw(be32(n)...) }
func bin32(b *wirefix.B, n uint32) *wirefix.B   { return b.Raw(0xc6).Raw(be32(n)...) }

func be32(n uint32) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }

// storedWithTail encodes ["BlockStored", [1], nil, [1, 2], 2, tail…] where
// tail writes count elements.
func storedWithTail(count int, tail enc) enc {
	return func(b *wirefix.B) {
		b.Array(5+count).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0)
		tail(b)
	}
}

// mapStoredWith encodes {"type": "BlockStored", "block_hashes": [1],
// "token_ids": [1, 2], "block_size": 2, key: value}.
func mapStoredWith(key string, value enc) enc {
	return func(b *wirefix.B) {
		b.Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).
			Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0).Str(key)
		value(b)
	}
}

var okStoredWant = Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1), Tokens: tks(1, 2), BlockSize: i64(2)}

// limited is malformedCase with limits.
func limited(name string, lim Limits, mid enc, tag string, typ Type, r messages.Reason) conformanceCase {
	tc := malformedCase(name, mid, tag, typ, r)
	tc.lim = lim
	return tc
}

func str(n int) string { return strings.Repeat("s", n) }

func limitCases() []conformanceCase {
	lim := smallLim
	lex := messages.ReasonLimitExceeded
	tr := messages.ReasonTruncated
	return []conformanceCase{
		// Block hashes.
		{
			name:    "limit/hashes at MaxHashes",
			lim:     lim,
			payload: sandwich(storedMin(func(b *wirefix.B) { b.Uints(1, 2, 3, 4) })),
			want: sandwiched(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2, 3, 4),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2)}),
		},
		limited("limit/hashes over MaxHashes", lim, storedMin(func(b *wirefix.B) { b.Uints(1, 2, 3, 4, 5) }),
			"BlockStored", TypeStored, lex),
		limited("limit/removed hashes over MaxHashes", lim,
			func(b *wirefix.B) { b.Array(3).Str("BlockRemoved").Uints(1, 2, 3, 4, 5).Str("GPU") },
			"BlockRemoved", TypeRemoved, lex),

		// Token ids (counted after bigram flattening).
		{
			name: "limit/tokens at MaxTokens",
			lim:  lim,
			payload: sandwich(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1, 2, 3).Nil().Tokens(1, 2, 3, 4, 5, 6).Uint(2, 0)
			}),
			want: sandwiched(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2, 3),
				Tokens: tks(1, 2, 3, 4, 5, 6), BlockSize: i64(2)}),
		},
		limited("limit/tokens over MaxTokens", lim,
			func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1, 2, 3).Nil().Tokens(1, 2, 3, 4, 5, 6, 7).Uint(2, 0)
			}, "BlockStored", TypeStored, lex),
		{
			name: "limit/bigram at MaxTokens (5 pairs, 6 tokens)",
			lim:  lim,
			payload: sandwich(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1, 2).Nil().
					Array(5).Tokens(1, 2).Tokens(2, 3).Tokens(3, 4).Tokens(4, 5).Tokens(5, 6).Uint(3, 0)
			}),
			want: sandwiched(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2),
				Tokens: tks(1, 2, 3, 4, 5, 6), Bigram: true, BlockSize: i64(3)}),
		},
		limited("limit/bigram over MaxTokens (6 pairs, 7 tokens)", lim,
			func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1, 2).Nil().
					Array(6).Tokens(1, 2).Tokens(2, 3).Tokens(3, 4).Tokens(4, 5).Tokens(5, 6).Tokens(6, 7).Uint(3, 0)
			}, "BlockStored", TypeStored, lex),

		// Strings the decoder keeps.
		{
			name:    "limit/lora_name at MaxStringBytes",
			lim:     lim,
			payload: sandwich(storedWithTail(3, func(b *wirefix.B) { b.Nil().Nil().Str(str(16)) })),
			want: sandwiched(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1), Tokens: tks(1, 2),
				BlockSize: i64(2), LoraName: str(16)}),
		},
		limited("limit/lora_name over MaxStringBytes", lim,
			storedWithTail(3, func(b *wirefix.B) { b.Nil().Nil().Str(str(17)) }), "BlockStored", TypeStored, lex),
		limited("limit/medium over MaxStringBytes", lim,
			storedWithTail(2, func(b *wirefix.B) { b.Nil().Str(str(300)) }), "BlockStored", TypeStored, lex),
		{
			name: "limit/session_id at 14 over MaxStringBytes is dropped, the blocks kept",
			lim:  lim,
			payload: sandwich(storedWithTail(10, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Nil().Str(str(17))
			})),
			want: sandwiched(withDropped(okStoredWant, HintSessionID)),
		},
		{
			name:    "limit/map session_id over MaxStringBytes is dropped, the blocks kept",
			lim:     lim,
			payload: sandwich(mapStoredWith("session_id", func(b *wirefix.B) { b.Str(str(5000)) })),
			want:    sandwiched(withDropped(okStoredWant, HintSessionID)),
		},
		{
			name:    "limit/ownership over MaxStringBytes is dropped, the blocks kept",
			lim:     lim,
			payload: sandwich(mapStoredWith("ownership", func(b *wirefix.B) { b.Str(str(17)) })),
			want:    sandwiched(withDropped(okStoredWant, HintOwnership)),
		},
		limited("limit/locality at 12 over MaxStringBytes still rejects (whose blocks)", lim,
			storedWithTail(8, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Nil().Nil().Nil().Str(str(17))
			}), "BlockStored", TypeStored, lex),
		limited("limit/metadata cache_salt over MaxStringBytes", lim,
			storedWithTail(3, func(b *wirefix.B) { b.Nil().Nil().Map(1).Str("cache_salt").Str(str(40)) }),
			"BlockStored", TypeStored, lex),
		limited("limit/extra_keys string over MaxStringBytes", lim,
			storedWithTail(4, func(b *wirefix.B) { b.Nil().Nil().Nil().Array(1).Array(1).Str(str(17)) }),
			"BlockStored", TypeStored, lex),
		limited("limit/tag over MaxStringBytes", lim,
			func(b *wirefix.B) { b.Array(2).Str("BlockStored" + str(6)).Uints(1) }, "", TypeUnknown, lex),
		{
			name:    "limit/long string in an ignored key is skipped, not kept",
			lim:     lim,
			payload: sandwich(mapStoredWith("zzz", func(b *wirefix.B) { b.Str(str(5000)) })),
			want:    sandwiched(okStoredWant),
		},

		// extra_keys / mm items.
		{
			name: "limit/extra items at MaxExtraItems",
			lim:  lim,
			payload: sandwich(storedWithTail(4, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Array(2).Array(2).Uint(1, 0).Str("a").Array(1).Array(2).Str("b").Uint(0, 0)
			})),
			want: sandwiched(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1), Tokens: tks(1, 2),
				BlockSize: i64(2), CacheSalt: "a", MM: mm(nil, hs(mmID("b")))}),
		},
		limited("limit/extra items over MaxExtraItems", lim,
			storedWithTail(4, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Array(2).Array(2).Uint(1, 0).Uint(2, 0).Array(2).Uint(3, 0).Uint(4, 0)
			}), "BlockStored", TypeStored, lex),
		limited("limit/mm infos over MaxExtraItems", lim,
			storedWithTail(5, func(b *wirefix.B) {
				b.Nil().Nil().Nil().Nil().Array(1).Array(1).
					Array(4).Array(1).Uint(1, 0).Array(1).Uint(2, 0).Array(1).Uint(3, 0).Array(1).Uint(4, 0)
			}), "BlockStored", TypeStored, lex),

		// Nesting of values skipped unread: any depth costs only its bytes,
		// and the event and the rest of the batch are kept.
		{
			name:    "depth/ignored map key nested 4 levels of maps",
			lim:     lim,
			payload: sandwich(mapStoredWith("zzz", nest(4, func(b *wirefix.B) { b.Map(1).Str("k").Uint(1, 0) }))),
			want:    sandwiched(okStoredWant),
		},
		{
			name: "depth/ignored map key nested 10,000 levels, middle event",
			lim:  lim,
			payload: b3(neighbourA,
				mapStoredWith("zzz", nest(10_000, func(b *wirefix.B) { b.Uint(7, 0) })),
				neighbourB, neighbourA),
			want: want3(neighbourAWant, okStoredWant, neighbourBWant, neighbourAWant),
		},
		{
			name: "depth/trailing positional element past 14 nested 40 levels",
			lim:  lim,
			payload: b3(neighbourA,
				storedWithTail(11, func(b *wirefix.B) {
					for i := 5; i < 15; i++ {
						b.Nil()
					}
					nest(40, func(b *wirefix.B) { b.Nil() })(b)
				}),
				neighbourB),
			want: want3(neighbourAWant, okStoredWant, neighbourBWant),
		},
		{
			name: "depth/opaque extra_keys item nested 40 levels",
			lim:  lim,
			payload: b3(neighbourA,
				storedWithTail(4, func(b *wirefix.B) {
					b.Nil().Nil().Nil().Array(1).Array(1)
					nest(40, func(b *wirefix.B) { b.Uint(1, 0) })(b)
				}),
				neighbourB),
			want: want3(neighbourAWant, okStoredWant, neighbourBWant),
		},
		{
			name: "depth/unknown tag body nested 40 levels",
			lim:  lim,
			payload: b3(neighbourA,
				func(b *wirefix.B) {
					b.Array(2).Str("LoadStat")
					nest(40, func(b *wirefix.B) { b.Uint(1, 0) })(b)
				},
				neighbourB),
			want: want3(neighbourAWant, rejected("LoadStat", TypeUnknown, messages.ReasonUnknownTag), neighbourBWant),
		},
		{
			// The skip ends exactly after the deep value: the next byte (nil)
			// is the batch's rank.
			name: "depth/ignored map key nested 9 levels, last event",
			lim:  lim,
			payload: b3Rank(func(b *wirefix.B) { b.Nil() }, neighbourA,
				mapStoredWith("zzz", nest(9, func(b *wirefix.B) { b.Uint(7, 0) }))),
			want: Batch{TS: ts0, Events: []Event{neighbourAWant, okStoredWant}},
		},

		// Truncated payloads.
		{
			name: "truncated/inside block_hashes of event 2 of 3",
			payload: cut(b3(neighbourA,
				func(b *wirefix.B) { b.Array(5).Str("BlockStored").Array(3).Uint(1, 0).Uint(2, 0).Uint(3, 0) },
				neighbourB), 1+12+1+1), // header, tag, array(3), first hash
			want: Batch{TS: ts0, Lost: 1, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "truncated/inside a uint64 hash",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(4)
				neighbourA(b)
				b.Array(5).Str("BlockStored").Array(1).Raw(0xcf, 1, 2, 3)
			}),
			want: Batch{TS: ts0, Lost: 2, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "truncated/inside a string",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				neighbourA(b)
				b.Array(8).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Raw(0xd9, 200, 'a', 'b')
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "truncated/inside a tag",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				neighbourA(b)
				b.Array(5).Raw(0xab, 'B', 'l', 'o')
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{neighbourAWant, rejected("", TypeUnknown, tr)}},
		},
		{
			name: "truncated/between events",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				neighbourA(b)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{neighbourAWant, rejected("", TypeUnknown, tr)}},
		},
		{
			name: "truncated/inside a map event",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				neighbourA(b)
				b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes")
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{neighbourAWant, rejected("BlockRemoved", TypeRemoved, tr)}},
		},
		{
			name: "truncated/inside the last event of a 2-element batch",
			payload: build(func(b *wirefix.B) {
				b.Array(2).F64(ts0).Array(2)
				neighbourA(b)
				b.Array(5).Str("BlockStored").Array(2).Uint(1, 0)
			}),
			want: Batch{TS: ts0, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "truncated/inside the last event of a 3-element batch",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				neighbourA(b)
				neighbourB(b)
				b.Array(5).Str("BlockStored").Array(2).Uint(1, 0)
			}),
			want: Batch{TS: ts0, Events: []Event{neighbourAWant, neighbourBWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "truncated/inside a uint64 hash of the last event of a 3-element batch",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2)
				neighbourA(b)
				b.Array(5).Str("BlockStored").Array(1).Raw(0xcf, 1, 2)
			}),
			want: Batch{TS: ts0, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "truncated/inside the last event of a map batch with a rank key",
			payload: build(func(b *wirefix.B) {
				b.Map(3).Str("ts").F64(ts0).Str("events").Array(2)
				neighbourA(b)
				b.Array(5).Str("BlockStored").Array(2).Uint(1, 0)
			}),
			want: Batch{TS: ts0, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},

		// Declared lengths far beyond the payload (≈ 4e9).
		{
			name: "hostile/array32 block_hashes",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2).Array(5).Str("BlockStored")
				array32(b, huge).Uint(1, 0).Uint(2, 0).Uint(3, 0)
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "hostile/array32 token_ids",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				neighbourA(b)
				b.Array(5).Str("BlockStored").Uints(1).Nil()
				array32(b, huge).Uint(1, 0)
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{neighbourAWant, rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "hostile/array32 event",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2)
				array32(b, huge).Str("BlockStored")
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{rejected("", TypeUnknown, tr)}},
		},
		{
			name: "hostile/array32 in an ignored map key",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2)
				mapStoredWith("zzz", func(b *wirefix.B) { array32(b, huge).Nil() })(b)
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "hostile/map32 event",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2)
				map32(b, huge).Str("type").Str("BlockStored")
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{rejected("", TypeUnknown, tr)}},
		},
		{
			name: "hostile/str32 tag",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2).Array(1)
				str32(b, huge).Raw([]byte("BlockStored")...)
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{rejected("", TypeUnknown, tr)}},
		},
		{
			name: "hostile/bin32 hash",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2).Array(5).Str("BlockStored").Array(1)
				bin32(b, huge).Raw(1, 2, 3, 4, 5, 6, 7, 8)
				neighbourA(b)
				b.Uint(0, 0)
			}),
			want: Batch{TS: ts0, Lost: 1, Events: []Event{rejected("BlockStored", TypeStored, tr)}},
		},
		{
			name: "hostile/array32 events",
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0)
				array32(b, huge)
				neighbourA(b)
				b.Uint(0, 0)
			}),
			notBatch: true,
		},
		{
			name: "hostile/array32 batch",
			payload: build(func(b *wirefix.B) {
				array32(b, huge).F64(ts0).Array(0).Uint(0, 0)
			}),
			notBatch: true,
		},
		{
			name: "hostile/map32 batch",
			payload: build(func(b *wirefix.B) {
				map32(b, huge).Str("events").Array(0)
			}),
			notBatch: true,
		},
	}
}

// b3Rank is b3 with the rank written by rank.
func b3Rank(rank enc, evs ...enc) []byte {
	b := wirefix.New().Array(3).F64(ts0).Array(len(evs))
	for _, e := range evs {
		e(b)
	}
	rank(b)
	return b.Bytes()
}

// cut truncates a b3 payload of three events whose first is neighbourA: it
// keeps the batch header, the first event and keep bytes of the second.
func cut(p []byte, keep int) []byte {
	header := len(build(func(b *wirefix.B) { b.Array(3).F64(ts0).Array(3) }))
	first := len(build(neighbourA))
	return p[:header+first+keep]
}

func TestLimits(t *testing.T) { runCases(t, limitCases()) }

// TestHostileLengthsDoNotAllocate decodes each payload that declares ≈ 4e9
// elements or bytes and checks that the decode allocates well under 1 MB.
func TestHostileLengthsDoNotAllocate(t *testing.T) {
	const budget = 1 << 20
	for _, tc := range limitCases() {
		if !strings.HasPrefix(tc.name, "hostile/") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.lim, tc.fold)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _ = d.Decode(tc.payload)
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n >= budget {
				t.Errorf("Decode(%s) allocated %d bytes, want < %d", hexPayload(tc.payload), n, budget)
			}
			// And on a warm decoder, averaged over several runs.
			runtime.ReadMemStats(&before)
			const runs = 8
			for i := 0; i < runs; i++ {
				_, _ = d.Decode(tc.payload)
			}
			runtime.ReadMemStats(&after)
			if n := (after.TotalAlloc - before.TotalAlloc) / runs; n >= budget {
				t.Errorf("warm Decode(%s) allocated %d bytes per run, want < %d", hexPayload(tc.payload), n, budget)
			}
		})
	}
}

// TestEmptyHashListIndependentOfHistory: a present but empty block_hashes
// array must decode the same on a fresh decoder and on one that already
// decoded hashes (the result may not depend on the decoder's arena state).
func TestEmptyHashListIndependentOfHistory(t *testing.T) {
	for _, tc := range []conformanceCase{
		{
			name:    "removed",
			payload: b3(func(b *wirefix.B) { b.Array(3).Str("BlockRemoved").Array(0).Str("DISK") }),
			want:    want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, Medium: "DISK"}),
		},
		{
			name: "stored placeholder",
			payload: b3(func(b *wirefix.B) {
				b.Map(4).Str("type").Str("BlockStored").Str("block_hashes").Array(0).
					Str("token_ids").Array(0).Str("block_size").Uint(0, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockSize: i64(0)}),
		},
	} {
		t.Run(tc.name+"/fresh decoder", func(t *testing.T) { checkDecode(t, NewDecoder(Limits{}, nil), &tc) })
		t.Run(tc.name+"/warm decoder", func(t *testing.T) {
			d := NewDecoder(Limits{}, nil)
			if _, err := d.Decode(b3(neighbourA)); err != nil {
				t.Fatal(err)
			}
			checkDecode(t, d, &tc)
		})
	}
}

// TestManySmallEventsAllocation: DefaultLimits promise that a hostile payload
// cannot make one decode allocate "more than a few megabytes beyond its own
// size". The cheapest payload per declared event is a batch of MaxEvents
// one-byte events (nil); the decode must stay within payload + 8 MB.
func TestManySmallEventsAllocation(t *testing.T) {
	const slack = 8 << 20
	n := DefaultLimits().MaxEvents - 1 // array16 header
	b := wirefix.New().Array(3).F64(ts0).Array(n)
	for i := 0; i < n; i++ {
		b.Nil()
	}
	payload := b.Uint(0, 0).Bytes()

	d := NewDecoder(Limits{}, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := d.Decode(payload)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(got.Events) != n || got.Events[n-1].Reason != messages.ReasonMalformed {
		t.Fatalf("Decode: %d events, want %d malformed ones", len(got.Events), n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(payload))+slack {
		t.Errorf("a %d-byte payload of %d nil events made one Decode allocate %d bytes (%.0f× the payload), want ≤ payload + %d",
			len(payload), n, alloc, float64(alloc)/float64(len(payload)), slack)
	}
}
