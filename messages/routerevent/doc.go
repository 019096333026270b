// Package routerevent is the msgpack form of messages.RouterEvent that
// kvrouter republishes on its ZMQ PUB for external consumers, compatible with
// NVIDIA Dynamo's RouterEvent and with consumers that predate session ids.
// README.md beside this file gives the compatibility rule, the sources and
// the byte layout in full.
//
// # Format: Dynamo's named layout
//
// Dynamo publishes RouterEvent with rmp_serde::to_vec_named (a msgpack map
// per struct, keys in declaration order): its event-plane codec
// (lib/runtime/src/transports/event_plane/codec.rs, MsgpackCodec::
// encode_payload) and, in its newest protocols.rs, the note on RouterEvent
// "MessagePack compatibility relies on `to_vec_named`; positional encoding
// is unsupported". Encode writes exactly those bytes for an event with no
// residency domain and no state source:
//
//	{worker_id, storage_tier, event: {event_id, data, dp_rank}, session_id?}
//
// The legacy (pre-session) RouterEvent has three fields in this order:
// worker_id (u64), storage_tier (enum), event (KvCacheEvent); the oldest had
// two (worker_id, event). session_id comes last and is left out when absent,
// as Dynamo's `skip_serializing_if = "Option::is_none"` does.
//
// Why a map and not the legacy array with session_id appended: the
// compatibility rule (README.md) allows either, and a positional append only helps readers that ignore extra
// elements. The decoders a legacy consumer would use — rmp_serde's derive
// and vmihailenco/msgpack's structs — reject an array whose length changed,
// even with nil in the new slot, while both read a map by name and skip
// unknown keys (legacy_test.go shows both). And Dynamo itself inserted a
// field (residency_domain) in the middle of the struct, which only a named
// encoding survives.
//
// # Decoding
//
// Decode reads every layout a producer has used: the named one (any key
// order, unknown keys ignored, optional fields absent), positional arrays
// ([worker_id, storage_tier, event, session_id?, …], [worker_id, event, …])
// with trailing elements ignored, enum variants by name or index, hashes of
// any integer width. Input is untrusted: lengths are checked against the
// bytes that remain and against Limits before anything is allocated, skipped
// values are walked without recursion, errors name the field and wrap one of
// ErrTruncated, ErrMalformed, ErrLimit or ErrUnsupported, and nothing
// panics (FuzzDecode).
//
// The reader uses vmihailenco/msgpack's streaming API over a bytes.Reader on
// the message, as messages/wire does (PeekCode, DecodeArrayLen, DecodeMapLen,
// DecodeBytesLen, DecodeExtHeader, DecodeInt64, DecodeNil, and Skip for
// scalars): each value's code is checked before the library reads it, and
// containers, strings and extensions are skipped by the reader itself, since
// the library's Skip recurses and reads a skipped string into a buffer of
// its declared size (see messages/wire/README.md, "Why vmihailenco/msgpack's
// streaming API"). Blocks in exactly Encode's layout are matched against
// their literal key bytes first, which halves the decoding time of a typical store. Encode is a
// plain appender: the library's Encoder writes the same bytes, but through
// an io.Writer, about nine times slower, and Encode is on the publisher's
// path.
//
// # Storage tiers
//
//	messages.TierDevice   "device"       StorageTier::Device (Dynamo's default)
//	messages.TierHost     "host_pinned"  StorageTier::HostPinned
//	messages.TierDisk     "disk"         StorageTier::Disk
//	messages.TierExternal "external"     StorageTier::External
package routerevent
