package routerevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvrouter/kvrouter/messages"
)

// Map keys and enum names, spelled as Dynamo's serde derives them
// (field names as declared, enums `rename_all = "snake_case"`).
const (
	keyWorkerID        = "worker_id"
	keyStorageTier     = "storage_tier"
	keyResidencyDomain = "residency_domain"
	keyEvent           = "event"
	keySessionID       = "session_id"

	keyEventID = "event_id"
	keyData    = "data"
	keyDpRank  = "dp_rank"

	keyParentHash    = "parent_hash"
	keyStartPosition = "start_position"
	keyBlocks        = "blocks"
	keyBlockHash     = "block_hash"
	keyTokensHash    = "tokens_hash"
	keyMmExtraInfo   = "mm_extra_info"
	keyBlockHashes   = "block_hashes"

	variantStored  = "stored"
	variantRemoved = "removed"
	variantCleared = "cleared"

	domainWorker = "worker"
)

// UnattributedSessionID is Dynamo's in-process stand-in for "no session"
// (UNATTRIBUTED_SESSION_ID in lib/kv-router/src/protocols.rs). It is not
// meant for the wire; Decode maps it to "" so that it never becomes a real
// session in kvrouter.
const UnattributedSessionID = "__dynamo_unattributed__"

// tierNames maps messages.StorageTier (the index) to Dynamo's StorageTier
// variant names; the index is also the variant's declaration index.
var tierNames = [...]string{
	messages.TierDevice:   "device",      // StorageTier::Device
	messages.TierHost:     "host_pinned", // StorageTier::HostPinned
	messages.TierDisk:     "disk",        // StorageTier::Disk
	messages.TierExternal: "external",    // StorageTier::External
}

// TierName returns Dynamo's wire name of t, or "" when t is not a tier.
func TierName(t messages.StorageTier) string {
	if int(t) < len(tierNames) {
		return tierNames[t]
	}
	return ""
}

// ParseTier maps Dynamo's wire name of a storage tier to kvrouter's tier.
func ParseTier(name string) (messages.StorageTier, bool) {
	for i, n := range tierNames {
		if n == name {
			return messages.StorageTier(i), true
		}
	}
	return 0, false
}

// Encode appends the msgpack encoding of ev to dst and returns the extended
// slice. It does not allocate when dst has room.
//
// The layout is the one `rmp_serde::to_vec_named` gives Dynamo's RouterEvent
// with no residency domain and no state source (see the package doc):
//
//	{"worker_id": u64, "storage_tier": "device"|"host_pinned"|"disk"|"external",
//	 "event": {"event_id": u64,
//	           "data": {"stored": {"parent_hash": u64|nil, "start_position": nil,
//	                               "blocks": [{"block_hash": u64, "tokens_hash": u64,
//	                                           "mm_extra_info": nil}, …]}}
//	                 | {"removed": {"block_hashes": [u64, …]}}
//	                 | "cleared",
//	           "dp_rank": u32},
//	 "session_id": str}            ← only when ev.SessionID != ""
//
// Integers take their smallest msgpack form, as rmp does. Encode never
// fails: an event that Validate rejects (unknown tier or kind) is written
// with the tier's number or a nil data field, which Decode and Dynamo both
// reject, so publishers should call Validate first.
func Encode(dst []byte, ev messages.RouterEvent) []byte {
	n := byte(3)
	if ev.SessionID != "" {
		n = 4
	}
	dst = append(dst, 0x80|n)
	dst = appendKey(dst, keyWorkerID)
	dst = appendUint(dst, uint64(ev.WorkerID))
	dst = appendKey(dst, keyStorageTier)
	if name := TierName(ev.StorageTier); name != "" {
		dst = appendKey(dst, name)
	} else {
		dst = appendUint(dst, uint64(ev.StorageTier))
	}
	dst = appendKey(dst, keyEvent)
	dst = appendEvent(dst, &ev.Event)
	if ev.SessionID != "" {
		dst = appendKey(dst, keySessionID)
		dst = appendStr(dst, ev.SessionID)
	}
	return dst
}

func appendEvent(dst []byte, ev *messages.KvCacheEvent) []byte {
	dst = append(dst, 0x83)
	dst = appendKey(dst, keyEventID)
	dst = appendUint(dst, ev.EventID)
	dst = appendKey(dst, keyData)
	switch ev.Kind {
	case messages.KindStored:
		dst = append(dst, 0x81)
		dst = appendKey(dst, variantStored)
		dst = append(dst, 0x83)
		dst = appendKey(dst, keyParentHash)
		if ev.HasParent {
			dst = appendUint(dst, uint64(ev.ParentHash))
		} else {
			dst = append(dst, 0xc0)
		}
		dst = appendKey(dst, keyStartPosition)
		dst = append(dst, 0xc0)
		dst = appendKey(dst, keyBlocks)
		dst = appendArrayLen(dst, len(ev.Blocks))
		for _, b := range ev.Blocks {
			dst = append(dst, 0x83)
			dst = appendKey(dst, keyBlockHash)
			dst = appendUint(dst, uint64(b.BlockHash))
			dst = appendKey(dst, keyTokensHash)
			dst = appendUint(dst, uint64(b.TokensHash))
			dst = appendKey(dst, keyMmExtraInfo)
			dst = append(dst, 0xc0)
		}
	case messages.KindRemoved:
		dst = append(dst, 0x81)
		dst = appendKey(dst, variantRemoved)
		dst = append(dst, 0x81)
		dst = appendKey(dst, keyBlockHashes)
		dst = appendArrayLen(dst, len(ev.Removed))
		for _, h := range ev.Removed {
			dst = appendUint(dst, uint64(h))
		}
	case messages.KindCleared:
		dst = appendKey(dst, variantCleared)
	default:
		dst = append(dst, 0xc0)
	}
	dst = appendKey(dst, keyDpRank)
	return appendUint(dst, uint64(ev.DpRank))
}

// Validate reports whether ev can be published: a known tier and kind, and
// no more blocks, hashes or session bytes than DefaultLimits lets Decode
// accept.
func Validate(ev messages.RouterEvent) error {
	lim := DefaultLimits()
	switch {
	case TierName(ev.StorageTier) == "":
		return fmt.Errorf("routerevent: storage tier %d has no wire name: %w", ev.StorageTier, ErrUnsupported)
	case ev.Event.Kind < messages.KindStored || ev.Event.Kind > messages.KindCleared:
		return fmt.Errorf("routerevent: event kind %d has no wire form: %w", ev.Event.Kind, ErrUnsupported)
	case len(ev.Event.Blocks) > lim.MaxBlocks:
		return fmt.Errorf("routerevent: %d blocks exceed the %d-block cap: %w", len(ev.Event.Blocks), lim.MaxBlocks, ErrLimit)
	case len(ev.Event.Removed) > lim.MaxBlocks:
		return fmt.Errorf("routerevent: %d hashes exceed the %d-hash cap: %w", len(ev.Event.Removed), lim.MaxBlocks, ErrLimit)
	case len(ev.SessionID) > lim.MaxSessionBytes:
		return fmt.Errorf("routerevent: session id of %d bytes exceeds the %d-byte cap: %w", len(ev.SessionID), lim.MaxSessionBytes, ErrLimit)
	}
	return nil
}

// appendKey appends a string known to be shorter than 32 bytes (fixstr).
func appendKey(dst []byte, s string) []byte {
	dst = append(dst, 0xa0|byte(len(s)))
	return append(dst, s...)
}

// appendStr appends s in its smallest str form (fixstr, str8, str16, str32).
func appendStr(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

// appendUint appends v in its smallest unsigned form, as rmp's write_uint.
func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

// Errors returned (wrapped, with the path of the offending field) by Decode
// and Validate.
var (
	// ErrTruncated: the input ends inside a value, or a declared length is
	// longer than what remains.
	ErrTruncated = errors.New("truncated")
	// ErrMalformed: a value of the wrong msgpack type, a missing required
	// field, a repeated field, an invalid msgpack code or trailing bytes.
	ErrMalformed = errors.New("malformed")
	// ErrLimit: more blocks, hashes, session bytes or nesting than Limits
	// allow.
	ErrLimit = errors.New("limit exceeded")
	// ErrUnsupported: a well-formed value kvrouter does not model (an
	// unknown tier or event variant, a residency domain other than worker).
	ErrUnsupported = errors.New("unsupported")
)
