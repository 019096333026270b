package wire

// Byte-exact conformance suite for the batch decoder
// (README.md in this directory, sections "Batch" and "Events").
// Over 500 lines on purpose: the suite is one table, a row per wire rule.
//
// Every payload is written by hand with wirefix, which picks the exact
// msgpack width of each value and shares no code with the decoder. Each table
// row states the whole expected Batch (TS, DpRank, Lost) and every field of
// every Event. Conventions of the comparison:
//
//   - nil and empty slices are equal; MM is compared per block with trailing
//     empty blocks ignored (MM[i] past the end means "no mm hashes").
//   - For an event that carries a Reason, only Tag, Type and Reason are
//     compared (and Detail must be non-empty): the other fields of a rejected
//     event are unspecified, the normalizer drops it. An accepted event must
//     have an empty Detail and match on every field.
//
// Malformed events are "sandwiched" between two well-formed neighbours (one
// positional BlockStored, one map-form BlockRemoved) so that every row also
// checks that the damage stays inside its own event.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
	"github.com/zeebo/xxh3"
)

// enc appends one msgpack value (usually one event) to a builder.
type enc func(b *wirefix.B)

// conformanceCase is one table row: a payload and the batch it must decode to.
type conformanceCase struct {
	name    string
	payload []byte
	lim     Limits  // zero value: DefaultLimits
	fold    FoldBin // nil: FoldLast8
	// notBatch: Decode must return a nil batch and an error wrapping ErrNotBatch.
	notBatch bool
	want     Batch
}

// ts0 is the timestamp of most fixtures (exact in float64).
const ts0 = 1764400000.25

func i64(v int64) Opt[int64]   { return Some(v) }
func u64(v uint64) Opt[uint64] { return Some(v) }
func hs(v ...uint64) []uint64  { return v }
func tks(v ...uint32) []uint32 { return v }
func mmID(id string) uint64    { return xxh3.HashString(id) }

// embedsID is what a prompt-embeds digest folds to: XXH3-64 of its bytes
// under the seed "embeds" (0x656d62656473), apart from mm identifiers.
func embedsID(d []byte) uint64 { return xxh3.HashSeed(d, 0x656d62656473) }

// digest is a 32-byte SHA-256-sized value starting at b (b, b+1, …).
func digest(b byte) []byte {
	d := make([]byte, 32)
	for i := range d {
		d[i] = b + byte(i)
	}
	return d
}
func mm(v ...[]uint64) [][]uint64 { return v }

// build encodes the given values one after the other.
func build(vs ...enc) []byte {
	b := wirefix.New()
	for _, v := range vs {
		v(b)
	}
	return b.Bytes()
}

// b3 encodes the usual vLLM batch [ts0 (float64), [evs…], 0 (fixint)].
func b3(evs ...enc) []byte {
	b := wirefix.New().Array(3).F64(ts0).Array(len(evs))
	for _, e := range evs {
		e(b)
	}
	return b.Uint(0, 0).Bytes()
}

// want3 is the batch b3 decodes to.
func want3(evs ...Event) Batch {
	return Batch{TS: ts0, DpRank: i64(0), Events: evs}
}

// Well-formed neighbours of malformed events.
var (
	// ["BlockStored", [0xAA, 0xAB], 0xA0, [1, 2, 3, 4], 2]
	neighbourA enc = func(b *wirefix.B) {
		b.Array(5).Str("BlockStored").Uints(0xAA, 0xAB).Uint(0xA0, 8).Tokens(1, 2, 3, 4).Uint(2, 0)
	}
	neighbourAWant = Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0xAA, 0xAB),
		Parent: u64(0xA0), Tokens: tks(1, 2, 3, 4), BlockSize: i64(2)}

	// {"type": "BlockRemoved", "block_hashes": [0xBB], "medium": "CPU"}
	neighbourB enc = func(b *wirefix.B) {
		b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(0xBB).Str("medium").Str("CPU")
	}
	neighbourBWant = Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(0xBB), Medium: "CPU"}
)

// sandwich encodes [ts0, [neighbourA, mid, neighbourB], 0].
func sandwich(mid enc) []byte { return b3(neighbourA, mid, neighbourB) }

// sandwiched is the batch sandwich decodes to, mid decoding to w.
func sandwiched(w Event) Batch { return want3(neighbourAWant, w, neighbourBWant) }

// rejected is the expectation for a rejected event.
func rejected(tag string, typ Type, r messages.Reason) Event {
	return Event{Tag: tag, Type: typ, Reason: r}
}

// malformedCase is a sandwiched event that must be rejected with reason r.
func malformedCase(name string, mid enc, tag string, typ Type, r messages.Reason) conformanceCase {
	return conformanceCase{name: name, payload: sandwich(mid), want: sandwiched(rejected(tag, typ, r))}
}

// storedMin encodes ["BlockStored", hashes, nil, [1, 2, 3, 4], 2] with the
// hashes written by h (which must write an array).
func storedMin(h enc) enc {
	return func(b *wirefix.B) {
		b.Array(5).Str("BlockStored")
		h(b)
		b.Nil().Tokens(1, 2, 3, 4).Uint(2, 0)
	}
}

// nest writes depth nested one-element arrays around leaf.
func nest(depth int, leaf enc) enc {
	return func(b *wirefix.B) {
		for i := 0; i < depth; i++ {
			b.Array(1)
		}
		leaf(b)
	}
}

// ---------------------------------------------------------------- comparison

func eqU64s(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func eqU32s(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// trimMM drops trailing blocks without mm hashes.
func trimMM(m [][]uint64) [][]uint64 {
	for len(m) > 0 && len(m[len(m)-1]) == 0 {
		m = m[:len(m)-1]
	}
	return m
}

func eqMM(a, b [][]uint64) bool {
	a, b = trimMM(a), trimMM(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !eqU64s(a[i], b[i]) {
			return false
		}
	}
	return true
}

func fmtU64s(v []uint64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%#x", x)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtMM(m [][]uint64) string {
	parts := make([]string, len(m))
	for i, blk := range m {
		parts[i] = fmtU64s(blk)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtOpt[T any](o Opt[T]) string {
	if !o.Ok {
		return "absent"
	}
	return fmt.Sprintf("%v", o.V)
}

func fmtOptHex(o Opt[uint64]) string {
	if !o.Ok {
		return "absent"
	}
	return fmt.Sprintf("%#x", o.V)
}

func reasonName(r messages.Reason) string {
	if r == messages.ReasonNone {
		return "none"
	}
	return r.String()
}

// diffEvent lists the differences between got and want (see the file
// comment for what is compared on rejected events).
func diffEvent(got, want Event) []string {
	var d []string
	str := func(field, g, w string) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %q, want %q", field, g, w))
		}
	}
	str("Tag", got.Tag, want.Tag)
	if got.Type != want.Type {
		d = append(d, fmt.Sprintf("Type = %d, want %d", got.Type, want.Type))
	}
	if got.Reason != want.Reason {
		d = append(d, fmt.Sprintf("Reason = %s (Detail %q), want %s",
			reasonName(got.Reason), got.Detail, reasonName(want.Reason)))
	}
	if want.Reason != messages.ReasonNone {
		if got.Reason != messages.ReasonNone && got.Detail == "" {
			d = append(d, "Detail is empty on a rejected event")
		}
		return d
	}
	if got.Detail != "" {
		d = append(d, fmt.Sprintf("Detail = %q on an accepted event", got.Detail))
	}
	if !eqU64s(got.BlockHashes, want.BlockHashes) {
		d = append(d, fmt.Sprintf("BlockHashes = %s, want %s", fmtU64s(got.BlockHashes), fmtU64s(want.BlockHashes)))
	}
	if got.Parent != want.Parent {
		d = append(d, fmt.Sprintf("Parent = %s, want %s", fmtOptHex(got.Parent), fmtOptHex(want.Parent)))
	}
	if !eqU32s(got.Tokens, want.Tokens) {
		d = append(d, fmt.Sprintf("Tokens = %v, want %v", got.Tokens, want.Tokens))
	}
	if got.Bigram != want.Bigram {
		d = append(d, fmt.Sprintf("Bigram = %v, want %v", got.Bigram, want.Bigram))
	}
	opt := func(field string, g, w Opt[int64]) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %s, want %s", field, fmtOpt(g), fmtOpt(w)))
		}
	}
	opt("BlockSize", got.BlockSize, want.BlockSize)
	opt("LoraID", got.LoraID, want.LoraID)
	str("Medium", got.Medium, want.Medium)
	str("LoraName", got.LoraName, want.LoraName)
	str("CacheSalt", got.CacheSalt, want.CacheSalt)
	str("SessionID", got.SessionID, want.SessionID)
	if !eqMM(got.MM, want.MM) {
		d = append(d, fmt.Sprintf("MM = %s, want %s", fmtMM(got.MM), fmtMM(want.MM)))
	}
	opt("GroupIdx", got.GroupIdx, want.GroupIdx)
	str("Kind", got.Kind, want.Kind)
	opt("SlidingWindow", got.SlidingWindow, want.SlidingWindow)
	str("Locality", got.Locality, want.Locality)
	str("Ownership", got.Ownership, want.Ownership)
	if !eqU32s(got.RemainingCopies, want.RemainingCopies) || (got.RemainingCopies == nil) != (want.RemainingCopies == nil) {
		d = append(d, fmt.Sprintf("RemainingCopies = %v, want %v", got.RemainingCopies, want.RemainingCopies))
	}
	if got.Dropped != want.Dropped {
		d = append(d, fmt.Sprintf("Dropped = %s, want %s", fmtHints(got.Dropped), fmtHints(want.Dropped)))
	}
	if (got.Dropped != 0) != (got.DroppedDetail != "") {
		d = append(d, fmt.Sprintf("DroppedDetail = %q with Dropped %s", got.DroppedDetail, fmtHints(got.Dropped)))
	}
	return d
}

// diffBatch lists the differences between got and want.
func diffBatch(got *Batch, want *Batch) []string {
	var d []string
	if math.Float64bits(got.TS) != math.Float64bits(want.TS) {
		d = append(d, fmt.Sprintf("TS = %v, want %v", got.TS, want.TS))
	}
	if got.DpRank != want.DpRank {
		d = append(d, fmt.Sprintf("DpRank = %s, want %s", fmtOpt(got.DpRank), fmtOpt(want.DpRank)))
	}
	if got.Lost != want.Lost {
		d = append(d, fmt.Sprintf("Lost = %d, want %d", got.Lost, want.Lost))
	}
	if got.Dropped != want.Dropped {
		d = append(d, fmt.Sprintf("batch Dropped = %s, want %s", fmtHints(got.Dropped), fmtHints(want.Dropped)))
	}
	if len(got.Events) != len(want.Events) {
		d = append(d, fmt.Sprintf("len(Events) = %d, want %d", len(got.Events), len(want.Events)))
	}
	for i := 0; i < len(got.Events) && i < len(want.Events); i++ {
		for _, e := range diffEvent(got.Events[i], want.Events[i]) {
			d = append(d, fmt.Sprintf("Events[%d].%s", i, e))
		}
	}
	for i := len(want.Events); i < len(got.Events); i++ {
		d = append(d, fmt.Sprintf("Events[%d] unexpected: tag %q reason %s", i, got.Events[i].Tag, reasonName(got.Events[i].Reason)))
	}
	return d
}

// hexPayload formats a payload for failure messages (long ones shortened).
func hexPayload(p []byte) string {
	const max = 160
	if len(p) > max {
		return fmt.Sprintf("% x … (%d bytes)", p[:max], len(p))
	}
	return fmt.Sprintf("% x", p)
}

// checkDecode decodes tc.payload with d and reports every difference.
func checkDecode(t *testing.T, d *Decoder, tc *conformanceCase) {
	t.Helper()
	got, err := d.Decode(tc.payload)
	if tc.notBatch {
		if err == nil {
			t.Fatalf("Decode(%s) = batch with %d events (lost %d), want an error wrapping ErrNotBatch",
				hexPayload(tc.payload), len(got.Events), got.Lost)
		}
		if !errors.Is(err, ErrNotBatch) {
			t.Fatalf("Decode(%s) error %v does not wrap ErrNotBatch", hexPayload(tc.payload), err)
		}
		if got != nil {
			t.Fatalf("Decode(%s) returned a batch along with error %v", hexPayload(tc.payload), err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Decode(%s): unexpected error: %v", hexPayload(tc.payload), err)
	}
	if got == nil {
		t.Fatalf("Decode(%s) returned a nil batch and no error", hexPayload(tc.payload))
	}
	if diffs := diffBatch(got, &tc.want); len(diffs) > 0 {
		t.Errorf("Decode(%s):\n\t%s", hexPayload(tc.payload), strings.Join(diffs, "\n\t"))
	}
}

// runCases runs each row with a fresh decoder.
func runCases(t *testing.T, cases []conformanceCase) {
	t.Helper()
	seen := map[string]bool{}
	for i := range cases {
		tc := &cases[i]
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			checkDecode(t, NewDecoder(tc.lim, tc.fold), tc)
		})
	}
}

// ------------------------------------------------------------------ batches

func batchCases() []conformanceCase {
	ev := neighbourA
	evWant := neighbourAWant
	return []conformanceCase{
		{
			name:    "batch/3 elements, rank fixint",
			payload: build(func(b *wirefix.B) { b.Array(3).F64(ts0).Array(1); ev(b); b.Uint(3, 0) }),
			want:    Batch{TS: ts0, DpRank: i64(3), Events: []Event{evWant}},
		},
		{
			name:    "batch/3 elements, rank nil (SGLang attn_dp_rank unset)",
			payload: build(func(b *wirefix.B) { b.Array(3).F64(ts0).Array(1); ev(b); b.Nil() }),
			want:    Batch{TS: ts0, Events: []Event{evWant}},
		},
		{
			name:    "batch/3 elements, rank uint16",
			payload: build(func(b *wirefix.B) { b.Array(3).F64(ts0).Array(1); ev(b); b.Uint(7, 16) }),
			want:    Batch{TS: ts0, DpRank: i64(7), Events: []Event{evWant}},
		},
		{
			name:    "batch/3 elements, rank int64 width",
			payload: build(func(b *wirefix.B) { b.Array(3).F64(ts0).Array(1); ev(b); b.Int(300, 64) }),
			want:    Batch{TS: ts0, DpRank: i64(300), Events: []Event{evWant}},
		},
		{
			name:    "batch/2 elements (old vLLM)",
			payload: build(func(b *wirefix.B) { b.Array(2).F64(ts0).Array(1); ev(b) }),
			want:    Batch{TS: ts0, Events: []Event{evWant}},
		},
		{
			name: "batch/5 elements, extra ignored",
			payload: build(func(b *wirefix.B) {
				b.Array(5).F64(ts0).Array(1)
				ev(b)
				b.Uint(1, 0).Str("future").Map(1).Str("k").Array(2).Nil().Bin([]byte{1, 2})
			}),
			want: Batch{TS: ts0, DpRank: i64(1), Events: []Event{evWant}},
		},
		{
			name: "batch/array16 header with 4 elements",
			payload: build(func(b *wirefix.B) {
				b.Raw(0xdc, 0x00, 0x04).F64(ts0).Array(1)
				ev(b)
				b.Uint(2, 0).Nil()
			}),
			want: Batch{TS: ts0, DpRank: i64(2), Events: []Event{evWant}},
		},
		{
			name: "batch/map {ts, events, data_parallel_rank}",
			payload: build(func(b *wirefix.B) {
				b.Map(3).Str("ts").F64(ts0).Str("events").Array(1)
				ev(b)
				b.Str("data_parallel_rank").Uint(2, 0)
			}),
			want: Batch{TS: ts0, DpRank: i64(2), Events: []Event{evWant}},
		},
		{
			name: "batch/map shuffled, unknown key, int ts, no rank",
			payload: build(func(b *wirefix.B) {
				b.Map(3).Str("events").Array(1)
				ev(b)
				b.Str("producer").Array(2).Str("x").Uint(1, 0).Str("ts").Uint(1764400000, 32)
			}),
			want: Batch{TS: 1764400000, Events: []Event{evWant}},
		},
		{
			name: "batch/map rank nil",
			payload: build(func(b *wirefix.B) {
				b.Map(3).Str("data_parallel_rank").Nil().Str("ts").F64(ts0).Str("events").Array(1)
				ev(b)
			}),
			want: Batch{TS: ts0, Events: []Event{evWant}},
		},
		{
			name:    "batch/ts float32",
			payload: build(func(b *wirefix.B) { b.Array(3).F32(1.5).Array(1); ev(b); b.Uint(0, 0) }),
			want:    Batch{TS: 1.5, DpRank: i64(0), Events: []Event{evWant}},
		},
		{
			name:    "batch/ts uint32",
			payload: build(func(b *wirefix.B) { b.Array(3).Uint(1764400000, 32).Array(1); ev(b); b.Uint(0, 0) }),
			want:    Batch{TS: 1764400000, DpRank: i64(0), Events: []Event{evWant}},
		},
		{
			name:    "batch/ts positive fixint",
			payload: build(func(b *wirefix.B) { b.Array(3).Uint(42, 0).Array(1); ev(b); b.Uint(0, 0) }),
			want:    Batch{TS: 42, DpRank: i64(0), Events: []Event{evWant}},
		},
		{
			name:    "batch/ts uint64 width",
			payload: build(func(b *wirefix.B) { b.Array(3).Uint(1764400000, 64).Array(1); ev(b); b.Uint(0, 0) }),
			want:    Batch{TS: 1764400000, DpRank: i64(0), Events: []Event{evWant}},
		},
		{
			name:    "batch/empty events (heartbeat)",
			payload: build(func(b *wirefix.B) { b.Array(3).F64(ts0).Array(0).Uint(0, 0) }),
			want:    Batch{TS: ts0, DpRank: i64(0)},
		},
		{
			name:    "batch/empty events, 2 elements",
			payload: build(func(b *wirefix.B) { b.Array(2).F64(ts0).Array(0) }),
			want:    Batch{TS: ts0},
		},
		{
			name:    "batch/empty events, map",
			payload: build(func(b *wirefix.B) { b.Map(2).Str("ts").F64(ts0).Str("events").Array(0) }),
			want:    Batch{TS: ts0},
		},
		{
			name: "batch/events at MaxEvents",
			lim:  Limits{MaxEvents: 2},
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(2)
				ev(b)
				ev(b)
				b.Nil()
			}),
			want: Batch{TS: ts0, Events: []Event{evWant, evWant}},
		},

		// Payloads that are not batches at all.
		{name: "not batch/empty payload", payload: []byte{}, notBatch: true},
		{name: "not batch/nil payload slice", payload: nil, notBatch: true},
		{name: "not batch/bare int", payload: build(func(b *wirefix.B) { b.Uint(5, 0) }), notBatch: true},
		{name: "not batch/msgpack nil", payload: build(func(b *wirefix.B) { b.Nil() }), notBatch: true},
		{name: "not batch/bare string", payload: build(func(b *wirefix.B) { b.Str("BlockStored") }), notBatch: true},
		{name: "not batch/invalid code 0xc1", payload: []byte{0xc1}, notBatch: true},
		{name: "not batch/array of 0", payload: build(func(b *wirefix.B) { b.Array(0) }), notBatch: true},
		{name: "not batch/array of 1", payload: build(func(b *wirefix.B) { b.Array(1).F64(ts0) }), notBatch: true},
		{
			name:     "not batch/events is an int",
			payload:  build(func(b *wirefix.B) { b.Array(3).F64(ts0).Uint(5, 0).Uint(0, 0) }),
			notBatch: true,
		},
		{
			name:     "not batch/events is a map",
			payload:  build(func(b *wirefix.B) { b.Array(3).F64(ts0).Map(0).Uint(0, 0) }),
			notBatch: true,
		},
		{
			name:     "not batch/events is nil",
			payload:  build(func(b *wirefix.B) { b.Array(3).F64(ts0).Nil().Uint(0, 0) }),
			notBatch: true,
		},
		{
			name: "not batch/events over MaxEvents",
			lim:  Limits{MaxEvents: 2},
			payload: build(func(b *wirefix.B) {
				b.Array(3).F64(ts0).Array(3)
				ev(b)
				ev(b)
				ev(b)
				b.Nil()
			}),
			notBatch: true,
		},
		{
			name:     "not batch/map without events",
			payload:  build(func(b *wirefix.B) { b.Map(2).Str("ts").F64(ts0).Str("data_parallel_rank").Uint(0, 0) }),
			notBatch: true,
		},
		{
			name:     "not batch/truncated batch header",
			payload:  build(func(b *wirefix.B) { b.Array(3).Raw(0xcb, 0x41, 0xda) }),
			notBatch: true,
		},
	}
}

// ------------------------------------------------------- BlockStored (array)

func storedPositionalCases() []conformanceCase {
	return []conformanceCase{
		{
			name: "stored/positional minimal (tag..block_size)",
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1, 2).Nil().Tokens(1, 2, 3, 4).Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2)}),
		},
		{
			name: "stored/positional str8 tag, array16 event header",
			payload: b3(func(b *wirefix.B) {
				b.Raw(0xdc, 0x00, 0x05).Raw(0xd9, 11).Raw([]byte("BlockStored")...).
					Uints(3).Nil().Tokens(5, 6).Uint(2, 16)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(3),
				Tokens: tks(5, 6), BlockSize: i64(2)}),
		},
		{
			name: "stored/positional full vLLM layout through session_id",
			payload: b3(func(b *wirefix.B) {
				b.Array(15).Str("BlockStored").
					Array(2).Uint(0xF000000000000001, 64).Uint(0xF000000000000002, 64). // 1 block_hashes
					Uint(0xE000000000000000, 64).                                       // 2 parent
					Tokens(1, 2, 3, 4).                                                 // 3 token_ids
					Uint(2, 0).                                                         // 4 block_size
					Uint(7, 0).                                                         // 5 lora_id
					Str("CPU").                                                         // 6 medium
					Str("my-lora").                                                     // 7 lora_name
					Array(2).Nil().Nil().                                               // 8 extra_keys
					Uint(0, 0).                                                         // 9 group_idx
					Str("full_attention").                                              // 10 kind
					Nil().                                                              // 11 sliding window
					Str("LOCAL").                                                       // 12 locality
					Str("owner-a").                                                     // 13 ownership
					Str("sess-1")                                                       // 14 session_id
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored,
				BlockHashes: hs(0xF000000000000001, 0xF000000000000002), Parent: u64(0xE000000000000000),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), LoraID: i64(7), Medium: "CPU",
				LoraName: "my-lora", GroupIdx: i64(0), Kind: "full_attention", Locality: "LOCAL",
				Ownership: "owner-a", SessionID: "sess-1"}),
		},
		{
			name: "stored/positional full layout, sliding window group",
			payload: b3(func(b *wirefix.B) {
				b.Array(15).Str("BlockStored").Uints(21).Uint(20, 0).Tokens(1, 2).Uint(2, 0).
					Nil().Str("GPU").Nil().Nil().
					Uint(1, 8).Str("sliding_window").Uint(4096, 16).Str("REMOTE").Nil().Nil()
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(21), Parent: u64(20),
				Tokens: tks(1, 2), BlockSize: i64(2), Medium: "GPU", GroupIdx: i64(1),
				Kind: "sliding_window", SlidingWindow: i64(4096), Locality: "REMOTE"}),
		},
		{
			name: "stored/positional all optional fields nil",
			payload: b3(func(b *wirefix.B) {
				b.Array(15).Str("BlockStored").Uints(9).Nil().Tokens(1, 2).Uint(2, 0)
				for i := 5; i < 15; i++ {
					b.Nil()
				}
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(9),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
		{
			name: "stored/positional medium empty string is absent",
			payload: b3(func(b *wirefix.B) {
				b.Array(7).Str("BlockStored").Uints(9).Nil().Tokens(1, 2).Uint(2, 0).Nil().Str("")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(9),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
		{
			name: "stored/positional lora_name string at 7",
			payload: b3(func(b *wirefix.B) {
				b.Array(8).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).
					Uint(3, 0).Str("GPU").Str("sql-adapter")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5), Tokens: tks(1, 2),
				BlockSize: i64(2), LoraID: i64(3), Medium: "GPU", LoraName: "sql-adapter"}),
		},
		{
			name: "stored/positional SGLang metadata map at 7",
			payload: b3(func(b *wirefix.B) {
				b.Array(8).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().
					Map(3).Str("cache_salt").Str("salt-1").Str("priority").Array(2).Uint(1, 0).F64(0.5).
					Str("session_id").Str("sgl-sess")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5), Tokens: tks(1, 2),
				BlockSize: i64(2), CacheSalt: "salt-1", SessionID: "sgl-sess"}),
		},
		{
			name: "stored/positional SGLang metadata map with lora_name",
			payload: b3(func(b *wirefix.B) {
				b.Array(8).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().
					Map(2).Str("lora_name").Str("meta-lora").Str("cache_salt").Nil()
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5), Tokens: tks(1, 2),
				BlockSize: i64(2), LoraName: "meta-lora"}),
		},
		{
			name: "stored/positional session_id at 14 beats metadata session_id",
			payload: b3(func(b *wirefix.B) {
				b.Array(15).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().
					Map(1).Str("session_id").Str("meta-sess").
					Nil().Nil().Nil().Nil().Nil().Nil().Str("flat-sess")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5), Tokens: tks(1, 2),
				BlockSize: i64(2), SessionID: "flat-sess"}),
		},
		{
			name: "stored/positional extra_keys cache-salt marker",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Nil().
					Array(2).Array(1).Str("dynamo-cache-salt:tenant-a").Nil()
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), CacheSalt: "tenant-a"}),
		},
		{
			name: "stored/positional extra_keys bare string in block 0 is vLLM's cache salt",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Nil().
					Array(2).Array(1).Str("img-hash-1").Nil()
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), CacheSalt: "img-hash-1"}),
		},
		{
			name: "stored/positional extra_keys [identifier, offset] pair",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Nil().
					Array(2).Nil().Array(2).Array(2).Str("img-2").Uint(5, 0).Array(2).Str("img-3").Uint(0, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), MM: mm(nil, hs(mmID("img-2"), mmID("img-3")))}),
		},
		{
			name: "stored/positional extra_keys bare strings: the lora name and any past block 0 are opaque",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Str("lora-x").
					Array(2).Array(1).Str("lora-x").Array(2).Str("lora-x").Str("img-4")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), LoraName: "lora-x"}),
		},
		{
			name: "stored/positional extra_keys opaque items",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Nil().
					Array(2).
					Array(5).Uint(5, 0).F64(1.5).Bool(true).Int(-3, 0).F32(2.5).
					Array(5).Array(2).Uint(7, 0).Uint(8, 0).Map(1).Str("k").Str("v").Nil().Bool(false).Raw(0xd4, 0x01, 0x02)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2)}),
		},
		{
			name: "stored/positional extra_keys as vLLM builds them: lora, mm pair with negative offset, salt in block 0",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Str("ad").
					Array(2).
					Array(3).Str("ad").Array(2).Str("img-a").Uint(1, 0).Str("tenant-7").
					Array(2).Str("ad").Array(2).Str("img-a").Int(-1, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), LoraName: "ad", CacheSalt: "tenant-7",
				MM: mm(hs(mmID("img-a")), hs(mmID("img-a")))}),
		},
		{
			name: "stored/map vLLM typed extra_keys items",
			payload: b3(func(b *wirefix.B) {
				b.Map(6).Str("type").Str("BlockStored").Str("block_hashes").Uints(5, 6).
					Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0).Str("event_version").Uint(1, 0).
					Str("extra_keys").Array(2).
					Array(3).
					Map(2).Str("type").Str("lora").Str("name").Str("ad").
					Map(4).Str("type").Str("mm").Str("modality").Str("image").Str("hash").Str("h1").Str("block_offset").Uint(0, 0).
					Map(2).Str("type").Str("cache_salt").Str("salt").Str("tenant-9").
					Array(2).
					Map(3).Str("type").Str("mm").Str("hash").Uint(77, 0).Str("block_offset").Int(-2, 0).
					Map(2).Str("type").Str("prompt_embeds").Str("hash").Bin([]byte{1, 2})
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), CacheSalt: "tenant-9",
				MM: mm(hs(mmID("h1")), hs(77, embedsID([]byte{1, 2})))}),
		},
		{
			name: "stored/positional extra_keys prompt-embeds digest (raw bytes, after lora and salt)",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Str("ad").
					Array(2).
					Array(3).Str("ad").Str("tenant-7").Bin(digest(0xa0)).
					Array(2).Str("ad").Bin(digest(0xb0))
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), LoraName: "ad", CacheSalt: "tenant-7",
				MM: mm(hs(embedsID(digest(0xa0))), hs(embedsID(digest(0xb0))))}),
		},
		{
			name: "stored/map extra_keys prompt-embeds digest, typed form: the same hash as the raw form",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(5, 6).
					Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0).
					Str("extra_keys").Array(2).
					Array(1).Map(2).Str("type").Str("prompt_embeds").Str("hash").Bin(digest(0xa0)).
					Array(1).Map(2).Str("hash").Bin(digest(0xb0)).Str("type").Str("prompt_embeds")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2),
				MM: mm(hs(embedsID(digest(0xa0))), hs(embedsID(digest(0xb0))))}),
		},
		{
			name: "stored/positional newer SGLang: salt marker in extra_keys, metadata map at 14",
			payload: b3(func(b *wirefix.B) {
				b.Array(15).Str("BlockStored").Uints(5).Nil().Tokens(1, 2).Uint(2, 0).Nil().Str("GPU").Nil().
					Array(1).Array(1).Str("dynamo-cache-salt:tenant-a").
					Uint(0, 0).Str("full_attention").Nil().Str("LOCAL").Nil().
					Map(1).Str("session_id").Str("sgl-s")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5), Tokens: tks(1, 2),
				BlockSize: i64(2), Medium: "GPU", CacheSalt: "tenant-a", SessionID: "sgl-s",
				GroupIdx: i64(0), Kind: "full_attention", Locality: "LOCAL"}),
		},
		{
			name: "stored/positional extra_keys salt, mm and opaque together",
			payload: b3(func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(5, 6, 7).Nil().Tokens(1, 2, 3, 4, 5, 6).Uint(2, 0).
					Nil().Nil().Str("ad").
					Array(3).
					Array(3).Str("ad").Str("dynamo-cache-salt:s").Uint(1, 0).
					Nil().
					Array(2).Array(2).Str("vid").Uint(1, 0).Str("img")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(5, 6, 7),
				Tokens: tks(1, 2, 3, 4, 5, 6), BlockSize: i64(2), LoraName: "ad", CacheSalt: "s",
				MM: mm(nil, nil, hs(mmID("vid")))}),
		},
		{
			name: "stored/positional Dynamo tail: block_mm_infos array, uint group_idx, kind",
			payload: b3(func(b *wirefix.B) {
				b.Array(12).Str("BlockStored").Uints(0x11, 0x12).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Nil().Nil().
					// 9: block_mm_infos = [ [ [ [h, [[0, 1]]] ] ], [ [ [h2, [[0,1]]], [h3, []] ] ] ]
					Array(2).
					Array(1).Array(1).Array(2).Uint(0xABCDEF0123456789, 64).Array(1).Array(2).Uint(0, 0).Uint(1, 0).
					Array(1).Array(2).
					Array(2).Uint(0x42, 0).Array(1).Array(2).Uint(0, 0).Uint(1, 0).
					Array(2).Uint(0x43, 0).Array(0).
					Uint(2, 0).  // 10: group_idx (uint)
					Str("mamba") // 11: kind
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11, 0x12),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), GroupIdx: i64(2), Kind: "mamba",
				MM: mm(hs(0xABCDEF0123456789), hs(0x42, 0x43))}),
		},
		{
			name: "stored/positional Dynamo tail: block_mm_infos as maps",
			payload: b3(func(b *wirefix.B) {
				b.Array(10).Str("BlockStored").Uints(0x11, 0x12).Nil().Tokens(1, 2, 3, 4).Uint(2, 0).
					Nil().Nil().Nil().Nil().
					Array(2).Nil().
					Map(1).Str("mm_objects").Array(1).
					Map(2).Str("offsets").Array(1).Array(2).Uint(0, 0).Uint(1, 0).Str("mm_hash").Uint(0x9000000000000009, 64)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11, 0x12),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), MM: mm(nil, hs(0x9000000000000009))}),
		},
		{
			name: "stored/positional Dynamo tail: nil mm infos, uint group_idx, kind",
			payload: b3(func(b *wirefix.B) {
				b.Array(12).Str("BlockStored").Uints(0x11).Nil().Tokens(1, 2).Uint(2, 0).
					Nil().Nil().Nil().Nil().
					Nil().Uint(3, 0).Str("mla_attention")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				Tokens: tks(1, 2), BlockSize: i64(2), GroupIdx: i64(3), Kind: "mla_attention"}),
		},
		{
			name: "stored/positional kind string at 9 without group_idx slot",
			payload: b3(func(b *wirefix.B) {
				b.Array(10).Str("BlockStored").Uints(0x11).Nil().Tokens(1, 2).Uint(2, 0).
					Nil().Nil().Nil().Nil().Str("sliding_window")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				Tokens: tks(1, 2), BlockSize: i64(2), Kind: "sliding_window"}),
		},
		{
			name: "stored/positional group_idx only at 9",
			payload: b3(func(b *wirefix.B) {
				b.Array(10).Str("BlockStored").Uints(0x11).Nil().Tokens(1, 2).Uint(2, 0).
					Nil().Nil().Nil().Nil().Uint(4, 32)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				Tokens: tks(1, 2), BlockSize: i64(2), GroupIdx: i64(4)}),
		},
		{
			name: "stored/positional extra trailing elements past 14 ignored",
			payload: b3(func(b *wirefix.B) {
				b.Array(18).Str("BlockStored").Uints(0x11).Nil().Tokens(1, 2).Uint(2, 0).
					Nil().Str("GPU").Nil().Nil().
					Uint(0, 0).Str("full_attention").Nil().Str("LOCAL").Nil().Str("s-14").
					Str("future-15").Map(1).Str("x").Array(1).Uint(1, 0).Uint(99, 64)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				Tokens: tks(1, 2), BlockSize: i64(2), Medium: "GPU", GroupIdx: i64(0),
				Kind: "full_attention", Locality: "LOCAL", SessionID: "s-14"}),
		},
		{
			name: "stored/positional empty tokens, block_size 0 (CPU placeholder)",
			payload: b3(func(b *wirefix.B) {
				b.Array(7).Str("BlockStored").Uints(0x11).Nil().Tokens().Uint(0, 0).Nil().Str("CPU")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				BlockSize: i64(0), Medium: "CPU"}),
		},
		{
			name: "stored/positional token ids of every width",
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(0x11).Nil().
					Array(8).Uint(0, 0).Uint(127, 0).Uint(200, 8).Uint(65535, 16).Uint(70000, 32).
					Uint(0xFFFFFFFF, 64).Int(5, 8).Int(100000, 32).
					Uint(8, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				Tokens: tks(0, 127, 200, 65535, 70000, 0xFFFFFFFF, 5, 100000), BlockSize: i64(8)}),
		},
		{
			name: "stored/positional EAGLE bigram token_ids",
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(0x11, 0x12).Nil().
					Array(4).Tokens(10, 11).Tokens(11, 12).Tokens(12, 13).Tokens(13, 14).
					Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11, 0x12),
				Tokens: tks(10, 11, 12, 13, 14), Bigram: true, BlockSize: i64(2)}),
		},
		{
			name: "stored/positional EAGLE single pair",
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(0x11).Nil().Array(1).Tokens(7, 8).Uint(1, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(0x11),
				Tokens: tks(7, 8), Bigram: true, BlockSize: i64(1)}),
		},
	}
}

// --------------------------------------------------------- BlockStored (map)

func storedMapCases() []conformanceCase {
	return []conformanceCase{
		{
			name: "stored/map keys shuffled",
			payload: b3(func(b *wirefix.B) {
				b.Map(6).
					Str("block_size").Uint(2, 0).
					Str("token_ids").Tokens(1, 2, 3, 4).
					Str("medium").Str("GPU").
					Str("type").Str("BlockStored").
					Str("parent_block_hash").Uint(0xFFFFFFFFFFFFFFF0, 64).
					Str("block_hashes").Array(2).Uint(0x8000000000000000, 64).Int(-5, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored,
				BlockHashes: hs(0x8000000000000000, 0xFFFFFFFFFFFFFFFB), Parent: u64(0xFFFFFFFFFFFFFFF0),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), Medium: "GPU"}),
		},
		{
			name: "stored/map unknown keys ignored",
			payload: b3(func(b *wirefix.B) {
				b.Map(9).
					Str("type").Str("BlockStored").
					Str("future_field").Map(2).Str("a").Array(2).Uint(1, 0).Uint(2, 0).Str("b").Nil().
					Str("block_hashes").Uints(3).
					Str("x").Nil().
					Str("token_ids").Tokens(1, 2).
					Uint(5, 0).Str("int key").
					Str("block_size").Uint(2, 0).
					Str("blob").Bin(make([]byte, 40)).
					Str("block_sizes").Str("not block_size")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(3),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
		{
			name: "stored/map full vLLM 0.26 event",
			payload: b3(func(b *wirefix.B) {
				b.Map(15).
					Str("type").Str("BlockStored").
					Str("block_hashes").Array(2).Uint(0xF000000000000001, 64).Uint(0xF000000000000002, 64).
					Str("parent_block_hash").Nil().
					Str("token_ids").Tokens(1, 2, 3, 4).
					Str("block_size").Uint(2, 0).
					Str("lora_id").Uint(9, 0).
					Str("medium").Str("CPU_PINNED").
					Str("lora_name").Str("ad-1").
					Str("extra_keys").Array(2).Array(1).Str("ad-1").Array(1).Array(2).Str("pic").Uint(3, 0).
					Str("group_idx").Uint(0, 0).
					Str("kv_cache_spec_kind").Str("mla_attention").
					Str("kv_cache_spec_sliding_window").Nil().
					Str("locality").Str("LOCAL").
					Str("ownership").Str("own").
					Str("session_id").Str("sess-9")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored,
				BlockHashes: hs(0xF000000000000001, 0xF000000000000002), Tokens: tks(1, 2, 3, 4),
				BlockSize: i64(2), LoraID: i64(9), Medium: "CPU_PINNED", LoraName: "ad-1",
				MM: mm(nil, hs(mmID("pic"))), GroupIdx: i64(0), Kind: "mla_attention",
				Locality: "LOCAL", Ownership: "own", SessionID: "sess-9"}),
		},
		{
			name: "stored/map group_idx 0 present",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").Str("group_idx").Uint(0, 0).
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), GroupIdx: i64(0)}),
		},
		{
			name: "stored/map group_idx absent",
			payload: b3(func(b *wirefix.B) {
				b.Map(4).Str("type").Str("BlockStored").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
		{
			name: "stored/map session_id present",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("session_id").Str("conv-42").Str("type").Str("BlockStored").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), SessionID: "conv-42"}),
		},
		{
			name: "stored/map session_id nil",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("session_id").Nil().Str("type").Str("BlockStored").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
		{
			name: "stored/map cache_salt precedence: flat beats metadata and marker",
			payload: b3(func(b *wirefix.B) {
				b.Map(7).
					Str("extra_keys").Array(1).Array(1).Str("dynamo-cache-salt:marker").
					Str("metadata").Map(1).Str("cache_salt").Str("meta").
					Str("type").Str("BlockStored").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0).
					Str("cache_salt").Str("flat")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), CacheSalt: "flat"}),
		},
		{
			name: "stored/map cache_salt precedence: metadata beats marker",
			payload: b3(func(b *wirefix.B) {
				b.Map(6).
					Str("type").Str("BlockStored").
					Str("metadata").Map(1).Str("cache_salt").Str("meta").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0).
					Str("extra_keys").Array(1).Array(1).Str("dynamo-cache-salt:marker")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), CacheSalt: "meta"}),
		},
		{
			name: "stored/map cache_salt from marker only",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).
					Str("type").Str("BlockStored").
					Str("block_hashes").Uints(1, 2).Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0).
					Str("extra_keys").Array(2).Nil().Array(1).Str("dynamo-cache-salt:marker")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), CacheSalt: "marker"}),
		},
		{
			name: "stored/map flat cache_salt only (SGLang)",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("cache_salt").Str("t1").Str("type").Str("BlockStored").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), CacheSalt: "t1"}),
		},
		{
			name: "stored/map metadata map under key metadata",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").
					Str("metadata").Map(2).Str("session_id").Str("m-sess").Str("cache_salt").Str("m-salt").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), CacheSalt: "m-salt", SessionID: "m-sess"}),
		},
		{
			name: "stored/map metadata map under key lora_name",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").
					Str("lora_name").Map(2).Str("cache_salt").Str("l-salt").Str("session_id").Str("l-sess").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), CacheSalt: "l-salt", SessionID: "l-sess"}),
		},
		{
			name: "stored/map flat session_id beats metadata session_id",
			payload: b3(func(b *wirefix.B) {
				b.Map(6).Str("metadata").Map(1).Str("session_id").Str("meta").
					Str("type").Str("BlockStored").Str("session_id").Str("flat").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), SessionID: "flat"}),
		},
		{
			name: "stored/map lora_name after extra_keys: block 0's other bare string is vLLM's salt",
			payload: b3(func(b *wirefix.B) {
				b.Map(6).Str("type").Str("BlockStored").
					Str("extra_keys").Array(1).Array(2).Str("ad-z").Str("img-z").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0).
					Str("lora_name").Str("ad-z")
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2), LoraName: "ad-z", CacheSalt: "img-z"}),
		},
		{
			name: "stored/map block_mm_infos key",
			payload: b3(func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").
					Str("block_mm_infos").Array(2).
					Map(1).Str("mm_objects").Array(2).
					Map(2).Str("mm_hash").Uint(0x77, 0).Str("offsets").Array(1).Array(2).Uint(0, 0).Uint(1, 0).
					Map(1).Str("mm_hash").Uint(0xFFFFFFFFFFFFFFFF, 64).
					Nil().
					Str("block_hashes").Uints(1, 2).Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2),
				Tokens: tks(1, 2, 3, 4), BlockSize: i64(2), MM: mm(hs(0x77, 0xFFFFFFFFFFFFFFFF))}),
		},
		{
			name: "stored/map EAGLE bigram token_ids",
			payload: b3(func(b *wirefix.B) {
				b.Map(4).Str("token_ids").Array(4).Tokens(10, 11).Tokens(11, 12).Tokens(12, 13).Tokens(13, 14).
					Str("type").Str("BlockStored").Str("block_hashes").Uints(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2),
				Tokens: tks(10, 11, 12, 13, 14), Bigram: true, BlockSize: i64(2)}),
		},
		{
			name: "stored/map16 header and str16 key",
			payload: b3(func(b *wirefix.B) {
				b.Raw(0xde, 0x00, 0x04).
					Raw(0xda, 0x00, 0x04).Raw([]byte("type")...).Str("BlockStored").
					Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
	}
}

// -------------------------------------------------------------- hash values

func hashCases() []conformanceCase {
	digest := make([]byte, 32)
	for i := range digest {
		digest[i] = byte(i)
	}
	widths := []struct {
		name string
		h    enc
		want uint64
	}{
		{"positive fixint 0", func(b *wirefix.B) { b.Raw(0x00) }, 0},
		{"positive fixint 127", func(b *wirefix.B) { b.Raw(0x7f) }, 127},
		{"uint8 255", func(b *wirefix.B) { b.Uint(255, 8) }, 255},
		{"uint8 holding 5", func(b *wirefix.B) { b.Uint(5, 8) }, 5},
		{"uint16 max", func(b *wirefix.B) { b.Uint(0xFFFF, 16) }, 0xFFFF},
		{"uint32 max", func(b *wirefix.B) { b.Uint(0xFFFFFFFF, 32) }, 0xFFFFFFFF},
		{"uint64 2^32", func(b *wirefix.B) { b.Uint(1<<32, 64) }, 1 << 32},
		{"uint64 holding 1", func(b *wirefix.B) { b.Uint(1, 64) }, 1},
		{"uint64 2^63", func(b *wirefix.B) { b.Uint(1<<63, 64) }, 1 << 63},
		{"uint64 vLLM digest", func(b *wirefix.B) { b.Uint(0x9E3779B97F4A7C15, 64) }, 0x9E3779B97F4A7C15},
		{"uint64 max", func(b *wirefix.B) { b.Uint(math.MaxUint64, 64) }, math.MaxUint64},
		{"negative fixint -1", func(b *wirefix.B) { b.Raw(0xff) }, 0xFFFFFFFFFFFFFFFF},
		{"negative fixint -32", func(b *wirefix.B) { b.Raw(0xe0) }, 0xFFFFFFFFFFFFFFE0},
		{"int8 -128", func(b *wirefix.B) { b.Int(-128, 8) }, 0xFFFFFFFFFFFFFF80},
		{"int8 holding 100", func(b *wirefix.B) { b.Int(100, 8) }, 100},
		{"int16 min", func(b *wirefix.B) { b.Int(math.MinInt16, 16) }, 0xFFFFFFFFFFFF8000},
		{"int16 holding -1", func(b *wirefix.B) { b.Int(-1, 16) }, 0xFFFFFFFFFFFFFFFF},
		{"int32 min", func(b *wirefix.B) { b.Int(math.MinInt32, 32) }, 0xFFFFFFFF80000000},
		{"int64 min (SGLang)", func(b *wirefix.B) { b.Int(math.MinInt64, 64) }, 0x8000000000000000},
		{"int64 -2 (SGLang)", func(b *wirefix.B) { b.Int(-2, 64) }, 0xFFFFFFFFFFFFFFFE},
		{"int64 max", func(b *wirefix.B) { b.Int(math.MaxInt64, 64) }, 0x7FFFFFFFFFFFFFFF},
		{"int64 -6148914691236517206", func(b *wirefix.B) { b.Int(-6148914691236517206, 64) }, 0xAAAAAAAAAAAAAAAA},
		{"bin8 32-byte digest", func(b *wirefix.B) { b.Bin(digest) }, 0x18191A1B1C1D1E1F},
		{"bin16 32-byte digest", func(b *wirefix.B) { b.Raw(0xc5, 0x00, 0x20).Raw(digest...) }, 0x18191A1B1C1D1E1F},
		{"bin32 32-byte digest", func(b *wirefix.B) { b.Raw(0xc6, 0, 0, 0, 0x20).Raw(digest...) }, 0x18191A1B1C1D1E1F},
		{"bin 8 bytes", func(b *wirefix.B) { b.Bin([]byte{0xF1, 2, 3, 4, 5, 6, 7, 8}) }, 0xF102030405060708},
		{"bin 3 bytes left-padded", func(b *wirefix.B) { b.Bin([]byte{1, 2, 3}) }, 0x010203},
		{"bin 1 byte", func(b *wirefix.B) { b.Bin([]byte{0xFE}) }, 0xFE},
	}
	var cases []conformanceCase
	for _, w := range widths {
		// The same encoding as the only block hash and as the parent.
		cases = append(cases, conformanceCase{
			name: "hash/" + w.name,
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Array(1)
				w.h(b)
				w.h(b)
				b.Tokens(1, 2).Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(w.want),
				Parent: u64(w.want), Tokens: tks(1, 2), BlockSize: i64(2)}),
		})
	}
	cases = append(cases,
		conformanceCase{
			name: "hash/mixed widths in one array, order kept",
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").
					Array(6).Raw(0x01).Int(-1, 0).Uint(1<<63, 64).Int(-2, 32).Bin([]byte{0xAB}).Uint(300, 16).
					Nil().Tokens(1, 2, 3, 4, 5, 6).Uint(1, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored,
				BlockHashes: hs(1, 0xFFFFFFFFFFFFFFFF, 1<<63, 0xFFFFFFFFFFFFFFFE, 0xAB, 300),
				Tokens:      tks(1, 2, 3, 4, 5, 6), BlockSize: i64(1)}),
		},
		conformanceCase{
			name: "hash/custom FoldBin",
			fold: func(p []byte) (uint64, bool) { return uint64(len(p)) << 8, len(p) > 0 },
			payload: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Array(1).Bin(digest).Nil().Tokens(1, 2).Uint(2, 0)
			}),
			want: want3(Event{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(32 << 8),
				Tokens: tks(1, 2), BlockSize: i64(2)}),
		},
		malformedCase("hash/empty bin", storedMin(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Bin(nil) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/str", storedMin(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Str("0xdeadbeef") }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/float64", storedMin(func(b *wirefix.B) { b.Array(1).F64(12345) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/float32", storedMin(func(b *wirefix.B) { b.Array(1).F32(3) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/nil", storedMin(func(b *wirefix.B) { b.Array(2).Nil().Uint(1, 0) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/array", storedMin(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Uints(2, 3) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/map", storedMin(func(b *wirefix.B) { b.Array(1).Map(1).Str("h").Uint(1, 0) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/bool", storedMin(func(b *wirefix.B) { b.Array(1).Bool(true) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/ext", storedMin(func(b *wirefix.B) { b.Array(1).Raw(0xd7, 0x01, 1, 2, 3, 4, 5, 6, 7, 8) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/block_hashes is an int", storedMin(func(b *wirefix.B) { b.Uint(7, 0) }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/block_hashes is nil", storedMin(func(b *wirefix.B) { b.Nil() }),
			"BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/parent is a string",
			func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1).Str("p").Tokens(1, 2).Uint(2, 0)
			}, "BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/parent is an empty bin",
			func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1).Bin(nil).Tokens(1, 2).Uint(2, 0)
			}, "BlockStored", TypeStored, messages.ReasonMalformed),
		malformedCase("hash/removed with a float hash",
			func(b *wirefix.B) { b.Array(3).Str("BlockRemoved").Array(1).F64(1).Str("GPU") },
			"BlockRemoved", TypeRemoved, messages.ReasonMalformed),
	)
	return cases
}

// ------------------------------------------- BlockRemoved, AllBlocksCleared

func removedClearedCases() []conformanceCase {
	return []conformanceCase{
		{
			name: "removed/positional with medium",
			payload: b3(func(b *wirefix.B) {
				b.Array(3).Str("BlockRemoved").Array(2).Uint(0xF000000000000001, 64).Int(-7, 64).Str("GPU")
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved,
				BlockHashes: hs(0xF000000000000001, 0xFFFFFFFFFFFFFFF9), Medium: "GPU"}),
		},
		{
			name:    "removed/positional medium nil",
			payload: b3(func(b *wirefix.B) { b.Array(3).Str("BlockRemoved").Uints(4).Nil() }),
			want:    want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(4)}),
		},
		{
			name:    "removed/positional without medium",
			payload: b3(func(b *wirefix.B) { b.Array(2).Str("BlockRemoved").Uints(4, 5) }),
			want:    want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(4, 5)}),
		},
		{
			name:    "removed/positional empty hash list",
			payload: b3(func(b *wirefix.B) { b.Array(3).Str("BlockRemoved").Array(0).Str("DISK") }),
			want:    want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, Medium: "DISK"}),
		},
		{
			name: "removed/positional full tail",
			payload: b3(func(b *wirefix.B) {
				b.Array(8).Str("BlockRemoved").Uints(4).Str("CPU").
					Uint(1, 0).Str("sliding_window").Uint(128, 8).Str("LOCAL").Str("own-r")
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(4), Medium: "CPU",
				GroupIdx: i64(1), Kind: "sliding_window", SlidingWindow: i64(128), Locality: "LOCAL",
				Ownership: "own-r"}),
		},
		{
			name: "removed/positional group_idx only",
			payload: b3(func(b *wirefix.B) {
				b.Array(4).Str("BlockRemoved").Uints(4).Str("GPU").Uint(0, 0)
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(4), Medium: "GPU",
				GroupIdx: i64(0)}),
		},
		{
			name: "removed/positional kind at 3 read by type",
			payload: b3(func(b *wirefix.B) {
				b.Array(4).Str("BlockRemoved").Uints(4).Str("GPU").Str("mamba")
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(4), Medium: "GPU",
				Kind: "mamba"}),
		},
		{
			name: "removed/positional trailing elements past ownership ignored",
			payload: b3(func(b *wirefix.B) {
				b.Array(11).Str("BlockRemoved").Uints(4).Str("GPU").
					Nil().Str("full_attention").Nil().Nil().Nil().Str("not-a-session").Uint(5, 0).Array(0)
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(4), Medium: "GPU",
				Kind: "full_attention"}),
		},
		{
			name: "removed/map form",
			payload: b3(func(b *wirefix.B) {
				b.Map(6).Str("medium").Str("DISK").Str("kv_cache_spec_kind").Str("full_attention").
					Str("unknown").Array(1).Nil().
					Str("block_hashes").Array(2).Int(-1, 64).Uint(2, 0).
					Str("group_idx").Uint(0, 0).
					Str("type").Str("BlockRemoved")
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(0xFFFFFFFFFFFFFFFF, 2),
				Medium: "DISK", GroupIdx: i64(0), Kind: "full_attention"}),
		},
		{
			name: "removed/map form minimal",
			payload: b3(func(b *wirefix.B) {
				b.Map(2).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(3)
			}),
			want: want3(Event{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(3)}),
		},
		malformedCase("removed/positional without block_hashes",
			func(b *wirefix.B) { b.Array(1).Str("BlockRemoved") },
			"BlockRemoved", TypeRemoved, messages.ReasonMalformed),
		malformedCase("removed/map without block_hashes",
			func(b *wirefix.B) { b.Map(2).Str("type").Str("BlockRemoved").Str("medium").Str("GPU") },
			"BlockRemoved", TypeRemoved, messages.ReasonMalformed),
		{
			name:    "cleared/positional",
			payload: b3(func(b *wirefix.B) { b.Array(1).Str("AllBlocksCleared") }),
			want:    want3(Event{Tag: "AllBlocksCleared", Type: TypeCleared}),
		},
		{
			name:    "cleared/positional with extra elements",
			payload: b3(func(b *wirefix.B) { b.Array(3).Str("AllBlocksCleared").Uints(1, 2).Str("x") }),
			want:    want3(Event{Tag: "AllBlocksCleared", Type: TypeCleared}),
		},
		{
			name:    "cleared/map",
			payload: b3(func(b *wirefix.B) { b.Map(1).Str("type").Str("AllBlocksCleared") }),
			want:    want3(Event{Tag: "AllBlocksCleared", Type: TypeCleared}),
		},
		{
			name: "cleared/map with unknown key",
			payload: b3(func(b *wirefix.B) {
				b.Map(2).Str("reason").Str("drop").Str("type").Str("AllBlocksCleared")
			}),
			want: want3(Event{Tag: "AllBlocksCleared", Type: TypeCleared}),
		},
		{
			name: "mixed/stored, removed, cleared in one batch",
			payload: b3(neighbourA, neighbourB,
				func(b *wirefix.B) { b.Array(1).Str("AllBlocksCleared") },
				func(b *wirefix.B) { b.Map(1).Str("type").Str("AllBlocksCleared") },
				neighbourA),
			want: want3(neighbourAWant, neighbourBWant, Event{Tag: "AllBlocksCleared", Type: TypeCleared},
				Event{Tag: "AllBlocksCleared", Type: TypeCleared}, neighbourAWant),
		},
	}
}

// --------------------------------------------- malformed events, neighbours

func malformedCases() []conformanceCase {
	mal := messages.ReasonMalformed
	unk := messages.ReasonUnknownTag
	st := func(tail enc) enc { // ["BlockStored", [1], nil, <tail…>] with a 5-element header
		return func(b *wirefix.B) { b.Array(5).Str("BlockStored").Uints(1).Nil(); tail(b) }
	}
	return []conformanceCase{
		malformedCase("event/int", func(b *wirefix.B) { b.Uint(5, 0) }, "", TypeUnknown, mal),
		malformedCase("event/nil", func(b *wirefix.B) { b.Nil() }, "", TypeUnknown, mal),
		malformedCase("event/string", func(b *wirefix.B) { b.Str("BlockStored") }, "", TypeUnknown, mal),
		malformedCase("event/bin", func(b *wirefix.B) { b.Bin([]byte{0x91, 0xa0}) }, "", TypeUnknown, mal),
		malformedCase("event/float", func(b *wirefix.B) { b.F64(1) }, "", TypeUnknown, mal),
		malformedCase("event/empty array", func(b *wirefix.B) { b.Array(0) }, "", TypeUnknown, mal),
		malformedCase("event/empty map", func(b *wirefix.B) { b.Map(0) }, "", TypeUnknown, mal),
		malformedCase("event/map without type",
			func(b *wirefix.B) {
				b.Map(3).Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).Str("block_size").Uint(2, 0)
			}, "", TypeUnknown, mal),
		malformedCase("event/positional non-string tag",
			func(b *wirefix.B) { b.Array(5).Uint(1, 0).Uints(1).Nil().Tokens(1, 2).Uint(2, 0) },
			"", TypeUnknown, mal),
		malformedCase("event/positional nil tag",
			func(b *wirefix.B) { b.Array(2).Nil().Uints(1) }, "", TypeUnknown, mal),
		malformedCase("event/map non-string type",
			func(b *wirefix.B) {
				b.Map(4).Str("type").Uint(0, 0).Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).
					Str("block_size").Uint(2, 0)
			}, "", TypeUnknown, mal),
		malformedCase("event/map bin type",
			func(b *wirefix.B) { b.Map(1).Str("type").Bin([]byte("BlockStored")) }, "", TypeUnknown, mal),
		malformedCase("tag/BlockInactive",
			func(b *wirefix.B) { b.Array(3).Str("BlockInactive").Uints(1, 2).Str("GPU") },
			"BlockInactive", TypeUnknown, unk),
		malformedCase("tag/Ignored",
			func(b *wirefix.B) { b.Array(1).Str("Ignored") }, "Ignored", TypeUnknown, unk),
		malformedCase("tag/LoadStat",
			func(b *wirefix.B) { b.Array(3).Str("LoadStat").F64(0.75).Map(1).Str("q").Uint(3, 0) },
			"LoadStat", TypeUnknown, unk),
		malformedCase("tag/BlockMigrated",
			func(b *wirefix.B) { b.Array(4).Str("BlockMigrated").Uints(1).Str("GPU").Str("CPU") },
			"BlockMigrated", TypeUnknown, unk),
		malformedCase("tag/lowercase blockstored",
			func(b *wirefix.B) { b.Array(5).Str("blockstored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0) },
			"blockstored", TypeUnknown, unk),
		malformedCase("tag/empty string",
			func(b *wirefix.B) { b.Array(2).Str("").Uints(1) }, "", TypeUnknown, unk),
		malformedCase("tag/map LoadStat",
			func(b *wirefix.B) { b.Map(2).Str("type").Str("LoadStat").Str("load").F64(0.5) },
			"LoadStat", TypeUnknown, unk),
		malformedCase("tag/map BlockInactive with stored-like fields",
			func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockInactive").Str("block_hashes").Uints(1).Str("medium").Str("CPU")
			}, "BlockInactive", TypeUnknown, unk),
		malformedCase("tag/map unknown type after a foreign-shaped field",
			func(b *wirefix.B) {
				// An unknown event type may reuse a BlockStored field name with
				// its own shape; the event is still an unknown tag.
				b.Map(2).Str("medium").Map(1).Str("tier").Uint(1, 0).Str("type").Str("BlockMigrated")
			}, "BlockMigrated", TypeUnknown, unk),
		malformedCase("token/negative fixint", st(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Int(-1, 0).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/negative int64", st(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Int(-1, 64).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/2^32", st(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Uint(1<<32, 64).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/uint64 max", st(func(b *wirefix.B) { b.Array(2).Uint(math.MaxUint64, 64).Uint(1, 0).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/string", st(func(b *wirefix.B) { b.Array(2).Uint(1, 0).Str("2").Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/float", st(func(b *wirefix.B) { b.Array(2).Uint(1, 0).F64(2).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/token_ids is a string", st(func(b *wirefix.B) { b.Str("1 2").Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/bigram mixed with int", st(func(b *wirefix.B) { b.Array(2).Tokens(1, 2).Uint(3, 0).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/int then bigram pair", st(func(b *wirefix.B) { b.Array(2).Uint(3, 0).Tokens(1, 2).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/bigram pair of one", st(func(b *wirefix.B) { b.Array(2).Tokens(1, 2).Tokens(3).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("token/bigram negative second", st(func(b *wirefix.B) { b.Array(1).Array(2).Uint(1, 0).Int(-1, 8).Uint(2, 0) }),
			"BlockStored", TypeStored, mal),
		malformedCase("block_size/string",
			func(b *wirefix.B) { b.Array(5).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Str("2") },
			"BlockStored", TypeStored, mal),
		malformedCase("block_size/float",
			func(b *wirefix.B) { b.Array(5).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).F64(2) },
			"BlockStored", TypeStored, mal),
		malformedCase("block_size/negative",
			func(b *wirefix.B) { b.Array(5).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Int(-2, 0) },
			"BlockStored", TypeStored, mal),
		malformedCase("block_size/nil",
			func(b *wirefix.B) { b.Array(5).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Nil() },
			"BlockStored", TypeStored, mal),
		malformedCase("block_size/absent (4 elements)",
			func(b *wirefix.B) { b.Array(4).Str("BlockStored").Uints(1).Nil().Tokens(1, 2) },
			"BlockStored", TypeStored, mal),
		malformedCase("block_size/map form string",
			func(b *wirefix.B) {
				b.Map(4).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).
					Str("block_size").Str("16")
			}, "BlockStored", TypeStored, mal),
		malformedCase("block_size/map form absent",
			func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2)
			}, "BlockStored", TypeStored, mal),
		malformedCase("medium/int",
			func(b *wirefix.B) {
				b.Array(7).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Uint(1, 0)
			},
			"BlockStored", TypeStored, mal),
		malformedCase("medium/array",
			func(b *wirefix.B) { b.Array(3).Str("BlockRemoved").Uints(1).Array(1).Str("GPU") },
			"BlockRemoved", TypeRemoved, mal),
		malformedCase("medium/map form bool",
			func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(1).Str("medium").Bool(true)
			}, "BlockRemoved", TypeRemoved, mal),
		malformedCase("group_idx/map form string",
			func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).
					Str("block_size").Uint(2, 0).Str("group_idx").Str("0")
			}, "BlockStored", TypeStored, mal),
		malformedCase("group_idx/map form negative",
			func(b *wirefix.B) {
				b.Map(5).Str("type").Str("BlockStored").Str("block_hashes").Uints(1).Str("token_ids").Tokens(1, 2).
					Str("block_size").Uint(2, 0).Str("group_idx").Int(-1, 0)
			}, "BlockStored", TypeStored, mal),
		malformedCase("group_idx/map form float",
			func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(1).Str("group_idx").F64(1)
			}, "BlockRemoved", TypeRemoved, mal),
		malformedCase("group_idx/positional negative",
			func(b *wirefix.B) {
				b.Array(10).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Nil().Nil().Int(-1, 0)
			}, "BlockStored", TypeStored, mal),
		malformedCase("group_idx/positional removed negative",
			func(b *wirefix.B) { b.Array(4).Str("BlockRemoved").Uints(1).Str("GPU").Int(-3, 16) },
			"BlockRemoved", TypeRemoved, mal),
		malformedCase("slot7/int",
			func(b *wirefix.B) {
				b.Array(8).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Uint(1, 0)
			}, "BlockStored", TypeStored, mal),
		malformedCase("extra_keys/string",
			func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Nil().Str("x")
			}, "BlockStored", TypeStored, mal),
		malformedCase("extra_keys/block entry is an int",
			func(b *wirefix.B) {
				b.Array(9).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Nil().Nil().
					Array(1).Uint(3, 0)
			}, "BlockStored", TypeStored, mal),
		malformedCase("kind/map form int",
			func(b *wirefix.B) {
				b.Map(3).Str("type").Str("BlockRemoved").Str("block_hashes").Uints(1).Str("kv_cache_spec_kind").Uint(1, 0)
			}, "BlockRemoved", TypeRemoved, mal),
		{
			name: "event/every kind of bad event in one batch keeps the good ones",
			payload: b3(neighbourA,
				func(b *wirefix.B) { b.Uint(1, 0) },
				func(b *wirefix.B) { b.Array(0) },
				neighbourB,
				func(b *wirefix.B) { b.Map(1).Str("block_hashes").Uints(1) },
				func(b *wirefix.B) { b.Array(1).Str("LoadStat") },
				func(b *wirefix.B) { b.Array(2).Uint(9, 0).Uints(1) },
				neighbourA,
			),
			want: want3(neighbourAWant,
				rejected("", TypeUnknown, mal),
				rejected("", TypeUnknown, mal),
				neighbourBWant,
				rejected("", TypeUnknown, mal),
				rejected("LoadStat", TypeUnknown, unk),
				rejected("", TypeUnknown, mal),
				neighbourAWant),
		},
	}
}

// ---------------------------------------------------------------- the tests

func TestConformanceBatches(t *testing.T)          { runCases(t, batchCases()) }
func TestConformanceStoredPositional(t *testing.T) { runCases(t, storedPositionalCases()) }
func TestConformanceStoredMap(t *testing.T)        { runCases(t, storedMapCases()) }
func TestConformanceHashes(t *testing.T)           { runCases(t, hashCases()) }
func TestConformanceRemovedCleared(t *testing.T)   { runCases(t, removedClearedCases()) }
func TestConformanceMalformed(t *testing.T)        { runCases(t, malformedCases()) }
func TestConformanceHints(t *testing.T)            { runCases(t, hintCases()) }

// allDefaultCases are the rows that use the default limits and fold.
func allDefaultCases() []conformanceCase {
	var out []conformanceCase
	for _, set := range [][]conformanceCase{batchCases(), storedPositionalCases(), storedMapCases(),
		hashCases(), removedClearedCases(), malformedCases(), hintCases()} {
		for _, tc := range set {
			var zero Limits
			if tc.lim == zero && tc.fold == nil {
				out = append(out, tc)
			}
		}
	}
	return out
}

// TestConformanceSharedDecoder runs every default-limits row through one
// decoder, forwards then backwards, so each row is decoded right after a
// different predecessor: no state may leak from one Decode into the next.
func TestConformanceSharedDecoder(t *testing.T) {
	cases := allDefaultCases()
	d := NewDecoder(Limits{}, nil)
	for pass, order := range [][]int{ascending(len(cases)), descending(len(cases))} {
		for _, i := range order {
			tc := &cases[i]
			t.Run(fmt.Sprintf("pass%d/%s", pass, tc.name), func(t *testing.T) { checkDecode(t, d, tc) })
		}
	}
}

func ascending(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func descending(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = n - 1 - i
	}
	return out
}

// TestDecoderReuse decodes two unrelated payloads with one decoder: the
// second result must be exactly what a fresh decoder gives, with nothing
// carried over (salt, session, MM, lora, rank, Lost, events).
func TestDecoderReuse(t *testing.T) {
	first := conformanceCase{
		name: "first",
		payload: build(func(b *wirefix.B) {
			b.Array(3).F64(11.5).Array(3)
			b.Array(15).Str("BlockStored").Uints(1, 2, 3).Uint(9, 0).Tokens(1, 2, 3, 4, 5, 6).Uint(2, 0).
				Uint(4, 0).Str("CPU").Str("lora-1").
				Array(3).Array(1).Str("dynamo-cache-salt:salt-1").Array(1).Array(2).Str("img").Uint(0, 0).Nil().
				Uint(2, 0).Str("sliding_window").Uint(64, 0).Str("REMOTE").Str("own").Str("sess")
			b.Array(5).Str("BlockStored").Uints(7).Nil().Array(2).Tokens(1, 2).Tokens(2, 3).Uint(2, 0)
			b.Array(2).Str("BlockRemoved").Uints(1, 2, 3)
			b.Uint(5, 0)
		}),
		want: Batch{TS: 11.5, DpRank: i64(5), Events: []Event{
			{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(1, 2, 3), Parent: u64(9),
				Tokens: tks(1, 2, 3, 4, 5, 6), BlockSize: i64(2), LoraID: i64(4), Medium: "CPU",
				LoraName: "lora-1", CacheSalt: "salt-1", MM: mm(nil, hs(mmID("img"))), GroupIdx: i64(2),
				Kind: "sliding_window", SlidingWindow: i64(64), Locality: "REMOTE", Ownership: "own",
				SessionID: "sess"},
			{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(7), Tokens: tks(1, 2, 3), Bigram: true,
				BlockSize: i64(2)},
			{Tag: "BlockRemoved", Type: TypeRemoved, BlockHashes: hs(1, 2, 3)},
		}},
	}
	second := conformanceCase{
		name: "second",
		payload: build(func(b *wirefix.B) {
			b.Array(2).F32(0.5).Array(4)
			b.Map(4).Str("type").Str("BlockStored").Str("block_hashes").Uints(100).
				Str("token_ids").Tokens(9, 9).Str("block_size").Uint(2, 0)
			b.Array(1).Str("AllBlocksCleared")
			b.Array(5).Str("BlockStored").Uints(200, 201).Nil().Tokens(5, 6, 7, 8).Uint(2, 0)
			b.Array(1).Str("BlockInactive")
		}),
		want: Batch{TS: 0.5, Events: []Event{
			{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(100), Tokens: tks(9, 9), BlockSize: i64(2)},
			{Tag: "AllBlocksCleared", Type: TypeCleared},
			{Tag: "BlockStored", Type: TypeStored, BlockHashes: hs(200, 201), Tokens: tks(5, 6, 7, 8), BlockSize: i64(2)},
			rejected("BlockInactive", TypeUnknown, messages.ReasonUnknownTag),
		}},
	}
	truncatedFirst := conformanceCase{
		name: "truncated",
		payload: build(func(b *wirefix.B) {
			b.Array(3).F64(1).Array(3)
			neighbourA(b)
			b.Array(5).Str("BlockStored").Array(3).Uint(1, 0) // ends inside the hashes
		}),
		want: Batch{TS: 1, Lost: 1, Events: []Event{neighbourAWant,
			rejected("BlockStored", TypeStored, messages.ReasonTruncated)}},
	}
	notBatch := conformanceCase{name: "not a batch", payload: []byte{0x05}, notBatch: true}

	d := NewDecoder(Limits{}, nil)
	for _, step := range []*conformanceCase{&first, &second, &first, &truncatedFirst, &second, &notBatch, &second, &first} {
		t.Run(step.name, func(t *testing.T) { checkDecode(t, d, step) })
	}

	// The second payload gives the same result from a fresh decoder (the
	// expectation above is the one the fresh decoder is held to as well).
	t.Run("second, fresh decoder", func(t *testing.T) { checkDecode(t, NewDecoder(Limits{}, nil), &second) })
}

// TestFixtureBytes pins the bytes wirefix writes for a few fixtures, so the
// suite cannot silently drift if the builder changes.
func TestFixtureBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want []byte
	}{
		{
			name: "minimal positional BlockStored batch",
			got: b3(func(b *wirefix.B) {
				b.Array(5).Str("BlockStored").Uints(1, 2).Nil().Tokens(1, 2, 3, 4).Uint(2, 0)
			}),
			want: append(append([]byte{0x93, 0xcb, 0x41, 0xda, 0x4a, 0xa6, 0xe0, 0x10, 0x00, 0x00, 0x91, 0x95, 0xab},
				"BlockStored"...), 0x92, 0x01, 0x02, 0xc0, 0x94, 0x01, 0x02, 0x03, 0x04, 0x02, 0x00),
		},
		{
			name: "hash widths",
			got: build(func(b *wirefix.B) {
				b.Uint(5, 8).Uint(5, 16).Uint(5, 32).Uint(1<<63, 64).Int(-1, 0).Int(-1, 8).Int(-1, 16).Int(-1, 32).Int(-1, 64)
			}),
			want: []byte{0xcc, 0x05, 0xcd, 0x00, 0x05, 0xce, 0x00, 0x00, 0x00, 0x05,
				0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xd0, 0xff, 0xd1, 0xff, 0xff, 0xd2, 0xff, 0xff, 0xff, 0xff,
				0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		},
		{
			name: "float32 ts and containers",
			got:  build(func(b *wirefix.B) { b.F32(1.5).Array(16).Map(16).Bin([]byte{1}) }),
			want: []byte{0xca, 0x3f, 0xc0, 0x00, 0x00, 0xdc, 0x00, 0x10, 0xde, 0x00, 0x10, 0xc4, 0x01, 0x01},
		},
	} {
		if string(tc.got) != string(tc.want) {
			t.Errorf("%s: wirefix wrote\n\t% x\nwant\n\t% x", tc.name, tc.got, tc.want)
		}
	}
}
