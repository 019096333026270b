package routerevent

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/vmihailenco/msgpack/v5"
)

// Limits bound what Decode accepts. They are checked before anything is
// allocated; every declared length is also checked against the bytes that
// remain.
type Limits struct {
	// MaxBlocks caps the blocks of a Stored event and the hashes of a
	// Removed one (65,536, as the engine decoder's hashes per event).
	MaxBlocks int
	// MaxSessionBytes caps the session id (4 KiB, as the engine decoder's
	// kept strings, so that every session kvrouter accepted can be re-read).
	MaxSessionBytes int
	// MaxDepth caps the nesting of values Decode skips (32; at most 64).
	MaxDepth int
}

// DefaultLimits returns the limits Decode uses.
func DefaultLimits() Limits {
	return Limits{MaxBlocks: 1 << 16, MaxSessionBytes: 4 << 10, MaxDepth: 32}
}

const maxDepth = 64

// Decoder decodes router events, reusing its buffers between calls: the
// Blocks and Removed slices of a returned event stay valid only until the
// next Decode. It is not safe for concurrent use. The zero value is not
// usable: call NewDecoder.
type Decoder struct {
	lim     Limits
	in      []byte           // the message being decoded
	r       bytes.Reader     // over in
	md      *msgpack.Decoder // reads r
	blocks  []messages.StoredBlock
	removed []messages.ExternalHash
	session string // the last session id, reused when the next one is equal
	pending [maxDepth + 1]int
}

// NewDecoder returns a decoder with the given limits; zero fields take
// DefaultLimits' values.
func NewDecoder(lim Limits) *Decoder {
	d := &Decoder{}
	d.setLimits(lim)
	d.md = msgpack.NewDecoder(&d.r)
	return d
}

func (d *Decoder) setLimits(lim Limits) {
	def := DefaultLimits()
	if lim.MaxBlocks <= 0 {
		lim.MaxBlocks = def.MaxBlocks
	}
	if lim.MaxSessionBytes <= 0 {
		lim.MaxSessionBytes = def.MaxSessionBytes
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = def.MaxDepth
	}
	lim.MaxDepth = min(lim.MaxDepth, maxDepth)
	d.lim = lim
}

// decoders are Decode's: a fresh Decoder (with its library decoder and read
// buffer) would cost more allocations than the event it returns.
var decoders = sync.Pool{New: func() any { return NewDecoder(Limits{}) }}

// maxPooledBlocks bounds the block and hash buffers a pooled decoder keeps,
// so that one large event does not pin its buffers in the pool.
const maxPooledBlocks = 1 << 10

// Decode decodes one router event with DefaultLimits. The event owns its
// memory. See Decoder.Decode for what is accepted.
func Decode(b []byte) (messages.RouterEvent, error) {
	d := decoders.Get().(*Decoder)
	ev, err := d.Decode(b)
	ev.Event.Blocks = slices.Clone(ev.Event.Blocks)
	ev.Event.Removed = slices.Clone(ev.Event.Removed)
	if cap(d.blocks) > maxPooledBlocks {
		d.blocks = nil
	}
	if cap(d.removed) > maxPooledBlocks {
		d.removed = nil
	}
	decoders.Put(d)
	return ev, err
}

// Decode decodes one router event: the whole of b must be one msgpack value.
//
// Accepted, so that every producer of the past and present is read:
//   - the named layout Encode writes (Dynamo's `to_vec_named`): keys in any
//     order, unknown keys ignored, storage_tier, dp_rank and session_id
//     optional; the nested structs as maps or as arrays;
//   - positional layouts (`rmp_serde::to_vec`): [worker_id, storage_tier,
//     event, session_id?, …] and the older [worker_id, event, …]; elements
//     past the known ones are ignored; the same inside the event
//     ([event_id, data, dp_rank?, …]), the store data ([parent_hash,
//     start_position?, blocks, …]) and each block ([block_hash, tokens_hash,
//     …]);
//   - enum values by name ("cleared", {"stored": …}) or by variant index;
//     hashes of any integer width (64-bit pattern kept); session_id nil, ""
//     or UnattributedSessionID meaning none; residency_domain absent or
//     "worker".
//
// Errors wrap ErrTruncated, ErrMalformed, ErrLimit or ErrUnsupported and
// name the offending field. Decode never panics.
func (d *Decoder) Decode(b []byte) (messages.RouterEvent, error) {
	if d.md == nil { // a zero Decoder: act as NewDecoder(Limits{}) rather than panic
		d.setLimits(d.lim)
		d.md = msgpack.NewDecoder(&d.r)
	}
	d.in = b
	d.r.Reset(b)
	d.blocks, d.removed = d.blocks[:0], d.removed[:0]
	var ev messages.RouterEvent
	err := d.routerEvent(&ev)
	if err == nil && d.rest() != 0 {
		err = errorf(ErrMalformed, "%d bytes after the event", d.rest())
	}
	d.in = nil
	d.r.Reset(nil)
	if err != nil {
		return messages.RouterEvent{}, fmt.Errorf("routerevent: %w", err)
	}
	return ev, nil
}

func (d *Decoder) routerEvent(ev *messages.RouterEvent) error {
	array, err := d.isArrayNext()
	if err != nil {
		return err
	}
	if array {
		return d.routerEventArray(ev)
	}
	return d.fields(&routerEventRecord, func(f uint8) error {
		switch f {
		case fWorkerID:
			return d.workerID(ev)
		case fTier:
			return d.tier(ev)
		case fDomain:
			return d.domain()
		case fEvent:
			return d.event(&ev.Event)
		}
		return d.sessionID(ev)
	})
}

func (d *Decoder) routerEventArray(ev *messages.RouterEvent) error {
	n, err := d.arrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return tooShort(routerEventRecord.name, n, keyWorkerID, keyEvent)
	}
	if err := d.workerID(ev); err != nil {
		return err
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	used := 2
	if isMap(c) || isArray(c) {
		// [worker_id, event, …]: the layout before storage_tier.
		if err := d.event(&ev.Event); err != nil {
			return err
		}
	} else {
		if n < 3 {
			return tooShort(routerEventRecord.name, n, keyWorkerID, keyStorageTier, keyEvent)
		}
		if err := d.tier(ev); err != nil {
			return err
		}
		if err := d.event(&ev.Event); err != nil {
			return err
		}
		used = 3
		if n > 3 {
			if err := d.sessionID(ev); err != nil {
				return err
			}
			used = 4
		}
	}
	return d.skipN(n - used)
}

func (d *Decoder) workerID(ev *messages.RouterEvent) error {
	v, err := d.uint(math.MaxUint64)
	if err != nil {
		return at(keyWorkerID, err)
	}
	ev.WorkerID = messages.WorkerID(v)
	return nil
}

// tier reads Dynamo's StorageTier: the variant name, or its index; nil
// counts as the default (device).
func (d *Decoder) tier(ev *messages.RouterEvent) error {
	if d.nilNext() {
		ev.StorageTier = messages.TierDevice
		return nil
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch {
	case isInt(c):
		v, err := d.uint(math.MaxUint32)
		if err != nil {
			return at(keyStorageTier, err)
		}
		if v >= uint64(len(tierNames)) {
			return at(keyStorageTier, errorf(ErrUnsupported, "variant index %d", v))
		}
		ev.StorageTier = messages.StorageTier(v)
		return nil
	case isStr(c):
		s, err := d.str()
		if err != nil {
			return at(keyStorageTier, err)
		}
		t, ok := ParseTier(string(s))
		if !ok {
			return at(keyStorageTier, errorf(ErrUnsupported, "unknown tier %q", clip(s)))
		}
		ev.StorageTier = t
		return nil
	}
	return at(keyStorageTier, wrongType("str, int or nil", c))
}

// domain accepts only the worker residency domain: a cache-owner event
// describes blocks no single worker holds, which kvrouter's index cannot
// represent (and which Dynamo never sends to domainless consumers).
func (d *Decoder) domain() error {
	s, err := d.str()
	if err != nil {
		return at(keyResidencyDomain, err)
	}
	if string(s) != domainWorker {
		return at(keyResidencyDomain, errorf(ErrUnsupported, "%q", clip(s)))
	}
	return nil
}

func (d *Decoder) sessionID(ev *messages.RouterEvent) error {
	if d.nilNext() {
		ev.SessionID = ""
		return nil
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	if !isStr(c) {
		return at(keySessionID, wrongType("str or nil", c))
	}
	s, err := d.str()
	if err != nil {
		return at(keySessionID, err)
	}
	if len(s) > d.lim.MaxSessionBytes {
		return at(keySessionID, errorf(ErrLimit, "%d bytes exceed the %d-byte cap", len(s), d.lim.MaxSessionBytes))
	}
	switch {
	case len(s) == 0 || string(s) == UnattributedSessionID:
		ev.SessionID = ""
	case string(s) == d.session:
		ev.SessionID = d.session
	default:
		d.session = string(s)
		ev.SessionID = d.session
	}
	return nil
}

func (d *Decoder) event(ev *messages.KvCacheEvent) error {
	err := d.record(&eventRecord, func(f uint8) error {
		switch f {
		case fEventID:
			return d.eventID(ev)
		case fData:
			return d.data(ev)
		}
		return d.dpRank(ev)
	})
	if err != nil {
		return at(keyEvent, err)
	}
	return nil
}

func (d *Decoder) eventID(ev *messages.KvCacheEvent) error {
	v, err := d.uint(math.MaxUint64)
	if err != nil {
		return at(keyEventID, err)
	}
	ev.EventID = v
	return nil
}

// dpRank reads the rank; nil counts as 0 (serde's default).
func (d *Decoder) dpRank(ev *messages.KvCacheEvent) error {
	if d.nilNext() {
		ev.DpRank = 0
		return nil
	}
	v, err := d.uint(math.MaxUint32)
	if err != nil {
		return at(keyDpRank, err)
	}
	ev.DpRank = messages.DpRank(v)
	return nil
}

// Variant indexes of Dynamo's KvCacheEventData, in declaration order.
const (
	idxStored = iota
	idxRemoved
	idxCleared
)

// clip shortens a hostile string for an error message.
func clip(s []byte) string {
	if len(s) > 64 {
		return string(s[:64]) + "…"
	}
	return string(s)
}
