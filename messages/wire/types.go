// Package wire decodes the msgpack KV-event batches that vLLM, SGLang and
// TensorRT-LLM publish into raw, engine-shaped events. It does not filter,
// hash or interpret events: that is the normalizer's job. README.md beside
// this file describes the formats ("Batch", "Events", "Hash values") and
// the frames around them ("Transport", "Replay").
//
// Decoding is lenient where engines differ (positional and map events, extra
// trailing fields, any integer width, 2- or 3-element or map-shaped batches)
// and strict where input is hostile: every declared length is checked against
// the bytes that remain and against Limits before anything is allocated, and
// no input makes it panic. A bad event is marked with a Reason and skipped
// without losing the good events around it.
package wire

import "github.com/kvrouter/kvrouter/messages"

// Opt is an optional value: Ok is false when the field was absent or nil.
type Opt[T any] struct {
	V  T
	Ok bool
}

// Some returns a present optional value.
func Some[T any](v T) Opt[T] { return Opt[T]{V: v, Ok: true} }

// Type is the kind of a wire event, from its tag.
type Type uint8

// Wire event types.
const (
	TypeUnknown Type = iota // tag missing, not a string, or not one of the three below
	TypeStored              // "BlockStored"
	TypeRemoved             // "BlockRemoved"
	TypeCleared             // "AllBlocksCleared"
)

// Tags as engines send them.
const (
	TagStored  = "BlockStored"
	TagRemoved = "BlockRemoved"
	TagCleared = "AllBlocksCleared"
)

// Event is one decoded wire event. Slices point into the Decoder's buffers
// and stay valid only until its next Decode call.
type Event struct {
	// Tag is the tag as sent ("" when absent or not a string).
	Tag  string
	Type Type
	// Reason is ReasonNone for a well-formed event; otherwise one of
	// ReasonMalformed, ReasonUnknownTag, ReasonLimitExceeded, ReasonTruncated,
	// with Detail saying what was wrong.
	Reason messages.Reason
	Detail string

	BlockHashes []uint64 // engine hashes, 64-bit two's-complement bit patterns
	Parent      Opt[uint64]
	// Tokens are the token ids; bigram (EAGLE) pairs are already flattened
	// (n pairs → n+1 tokens) and Bigram is set.
	Tokens    []uint32
	Bigram    bool
	BlockSize Opt[int64]
	LoraID    Opt[int64]
	Medium    string // "" when absent, nil or ""
	LoraName  string
	// CacheSalt is resolved by precedence: the flat `cache_salt` key, then
	// the SGLang metadata map, then a "dynamo-cache-salt:" extra key.
	CacheSalt string
	// SessionID: the flat `session_id` field (map key or position 14), else
	// the SGLang metadata map's.
	SessionID string
	// MM holds each block's multimodal hashes (nil when the event has none):
	// from block_mm_infos and from multimodal identifiers in extra_keys.
	MM            [][]uint64
	GroupIdx      Opt[int64]
	Kind          string // kv_cache_spec_kind
	SlidingWindow Opt[int64]
	Locality      string
	Ownership     string
	// RemainingCopies (BlockRemoved, newer vLLM) holds, per block hash, the
	// copies of that block the engine still holds: nil when absent
	// (copies.go).
	RemainingCopies []uint32
	// Dropped is the set of hints whose value was unusable (over a cap or
	// of the wrong type) and left out; the event is kept without them.
	// DroppedDetail says what was wrong with the first one, for logs.
	Dropped       Hints
	DroppedDetail string
}

// Batch is one decoded engine batch.
type Batch struct {
	TS     float64
	Events []Event
	// DpRank is the batch's data-parallel rank, when the engine sent one.
	DpRank Opt[int64]
	// Lost counts events the batch declared but that could not be reached
	// because an earlier event was truncated or nested too deeply; the event
	// that stopped decoding carries ReasonTruncated or ReasonLimitExceeded.
	Lost int
	// Dropped holds HintTimestamp when the batch's ts was unusable (TS is 0).
	Dropped Hints
	// Layout is the set of encodings its events used.
	Layout Layout
}

// Limits bound what one payload may make the decoder allocate. A value over a
// cap marks its event ReasonLimitExceeded; the rest of the batch is kept.
type Limits struct {
	MaxEvents      int // events per batch; over it the batch is rejected
	MaxHashes      int // block hashes per event
	MaxTokens      int // token ids per event (after bigram flattening)
	MaxStringBytes int // bytes of any one string the decoder keeps
	MaxExtraItems  int // extra_keys / mm items per event
}

// DefaultLimits, each stated once here. The largest event a real engine
// emits is one request's prefill in one scheduler step: vLLM publishes one
// BlockStored per request per step with every block it completed, so a
// prompt served without chunked prefill is one event of context ÷ block
// size hashes and context tokens (SGLang publishes one event per page;
// TensorRT-LLM one per stored chain). For contexts of millions of tokens:
//   - MaxTokens 4,194,304: a 4 M-token prefill in one event (16 MiB of ids);
//   - MaxHashes 1,048,576: that prefill at block size 4, or a 1 M-token one
//     at block size 1;
//   - MaxExtraItems 1,048,576: one LoRA name, mm item or embeds digest per
//     block of such an event;
//   - MaxStringBytes 4,096: names, salts, session ids (a hint over it is
//     dropped, messages/wire/README.md "Bad input");
//   - MaxEvents 16,384 per batch: a scheduler step emits far fewer.
//
// Every length is also checked against the bytes that remain, so what a
// hostile payload makes one decode allocate stays proportional to its own
// size (at most 8 bytes per hash byte, 4 per token byte), and the listener's
// ZMTP guard caps that size.
func DefaultLimits() Limits {
	return Limits{
		MaxEvents:      16384,
		MaxHashes:      1 << 20,
		MaxTokens:      1 << 22,
		MaxStringBytes: 4096,
		MaxExtraItems:  1 << 20,
	}
}

// FoldBin turns a `bin` block hash into its 64-bit value. vLLM with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 sends the raw 32-byte digest; the
// default fold (FoldLast8) keeps its last 8 bytes read big-endian.
type FoldBin func(b []byte) (uint64, bool)

// FoldLast8 reads the last 8 bytes of b big-endian (shorter input is
// left-padded with zeros). Empty input is rejected.
func FoldLast8(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	if len(b) > 8 {
		b = b[len(b)-8:]
	}
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v, true
}
