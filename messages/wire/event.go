package wire

import (
	"strings"

	"github.com/kvrouter/kvrouter/messages"
)

// field names one event attribute, whichever encoding carried it.
type field uint8

const (
	fIgnore field = iota
	fType
	fBlockHashes
	fParent
	fTokens
	fBlockSize
	fLoraID
	fMedium
	fSlot7 // lora_name (str) or SGLang metadata (map), told apart by type
	fExtraKeys
	fGroupIdx
	fKind
	fSliding
	fLocality
	fOwnership
	fSessionID
	fCacheSalt
	fMMInfos
	fCopies // remaining_copy_counts (copies.go)
	fMMKeys // mm_keys (TensorRT-LLM, mmkeys.go)
)

// storedPositions is BlockStored's fixed positional prefix (vLLM declaration
// order); positions from storedTail on are the tail.
var storedPositions = [...]field{1: fBlockHashes, 2: fParent, 3: fTokens, 4: fBlockSize,
	5: fLoraID, 6: fMedium, 7: fSlot7, 8: fExtraKeys}

const storedTail = 9

// removedPositions is BlockRemoved's fixed positional prefix.
var removedPositions = [...]field{1: fBlockHashes, 2: fMedium}

const removedTail = 3

// tailLayout is the fixed layout of both tails (BlockRemoved has no
// session_id, so its sixth slot is never read).
var tailLayout = [...]field{fGroupIdx, fKind, fSliding, fLocality, fOwnership, fSessionID}

// keyFields maps map-form keys (and batch keys, as fIgnore) to fields; it
// fills names (names.go), where they are looked up.
var keyFields = map[string]field{
	"type": fType, "block_hashes": fBlockHashes, "parent_block_hash": fParent,
	"token_ids": fTokens, "block_size": fBlockSize, "lora_id": fLoraID, "medium": fMedium,
	"lora_name": fSlot7, "metadata": fSlot7, "extra_keys": fExtraKeys, "group_idx": fGroupIdx,
	"kv_cache_spec_kind": fKind, "kv_cache_spec_sliding_window": fSliding,
	"locality": fLocality, "ownership": fOwnership, "session_id": fSessionID,
	"cache_salt": fCacheSalt, "block_mm_infos": fMMInfos, "remaining_copy_counts": fCopies, "mm_keys": fMMKeys,
	"ts": fIgnore, "events": fIgnore, "data_parallel_rank": fIgnore, "dp_rank": fIgnore, "attn_dp_rank": fIgnore,
	"mm_objects": fIgnore, "mm_hash": fIgnore,
}

// keyString returns the shared spelling of a known key, or "" for keys
// kvrouter does not read (they are skipped; their spelling is not needed).
func keyString(b []byte) string {
	if e := names.lookup(b); e != nil && e.key {
		return e.s
	}
	return ""
}

// keyField returns the field a map key names: fIgnore for keys kvrouter
// skips and for unknown keys.
func keyField(b []byte) field {
	if e := names.lookup(b); e != nil {
		return e.f
	}
	return fIgnore
}

// eventState holds what one event's fields say before precedence rules
// resolve them into the Event.
type eventState struct {
	ev          *Event
	metaSalt    string
	extraSalt   string
	metaSession string
	bareExtra   []string // block 0's bare extra_keys strings: LoRA name or vLLM's cache salt
	mmItems     int
	// entries is the entry count of the last per-block list read
	// (perBlock); mmKeyEntries mm_keys' (-1: absent or nil).
	entries, mmKeyEntries int
}

// setExtraSalt keeps the first cache salt found in extra_keys.
func (st *eventState) setExtraSalt(salt string) {
	if st.extraSalt == "" {
		st.extraSalt = salt
	}
}

// fail records the first field error of the event; structural errors are
// returned to abort the batch.
func (st *eventState) fail(err error) error {
	if err == nil {
		return nil
	}
	fe, ok := err.(*fieldError)
	if !ok {
		return err
	}
	if st.ev.Reason == messages.ReasonNone {
		st.ev.Reason, st.ev.Detail = fe.reason, fe.detail
	}
	return nil
}

// event decodes one event of either encoding.
func (x *Decoder) event(ev *Event) error {
	st := eventState{ev: ev, mmKeyEntries: -1}
	cl, err := x.peek()
	if err != nil {
		return err
	}
	switch cl {
	case classArray:
		x.batch.Layout |= LayoutPositional
		err = x.positionalEvent(&st)
	case classMap:
		x.batch.Layout |= LayoutMap
		err = x.mapEvent(&st)
	default:
		if err := x.skip(); err != nil {
			return err
		}
		err = malformed("event is a msgpack %s, want an array or map", cl)
	}
	if err = st.fail(err); err != nil {
		return err
	}
	x.resolve(&st)
	return nil
}

func (x *Decoder) positionalEvent(st *eventState) error {
	n, err := x.arrayLen()
	if err != nil {
		return err
	}
	if n == 0 {
		return malformed("event is an empty array")
	}
	if err := st.fail(x.setField(st, fType)); err != nil {
		return err
	}
	var prefix []field
	tail := n
	switch st.ev.Type {
	case TypeStored:
		prefix, tail = storedPositions[:], storedTail
	case TypeRemoved:
		prefix, tail = removedPositions[:], removedTail
	default: // AllBlocksCleared carries nothing; unknown tags are skipped whole
		return x.skipN(n - 1)
	}
	for i := 1; i < n && i < tail; i++ {
		if err := st.fail(x.setField(st, prefix[i])); err != nil {
			return err
		}
	}
	if n > tail {
		return x.tail(st, n-tail)
	}
	return nil
}

func (x *Decoder) mapEvent(st *eventState) error {
	n, err := x.mapLen()
	if err != nil {
		return err
	}
	sawType := false
	for i := 0; i < n; i++ {
		f, err := x.keyField()
		if err != nil {
			return err
		}
		sawType = sawType || f == fType
		if err := st.fail(x.setField(st, f)); err != nil {
			return err
		}
	}
	if !sawType {
		return malformed("map event has no type key")
	}
	return nil
}

// setField decodes the next value as field f; an unusable value of a hint
// field is dropped, not an error.
func (x *Decoder) setField(st *eventState, f field) error {
	err := x.readField(st, f)
	if h, ok := hintOf(f); ok {
		return st.drop(h, err)
	}
	return err
}

// readField decodes the next value as field f.
func (x *Decoder) readField(st *eventState, f field) error {
	ev := st.ev
	var err error
	switch f {
	case fType:
		return x.tag(ev)
	case fBlockHashes:
		return x.blockHashes(ev)
	case fParent:
		cl, err := x.peek()
		if err != nil {
			return err
		}
		if cl == classNil {
			return x.decodeNil()
		}
		h, err := x.hash("parent_block_hash")
		ev.Parent = Opt[uint64]{V: h, Ok: err == nil}
		return err
	case fTokens:
		return x.tokenIDs(ev)
	case fBlockSize:
		ev.BlockSize, err = x.optInt("block_size", 0)
	case fLoraID:
		ev.LoraID, err = x.optInt("lora_id", 0)
	case fMedium:
		ev.Medium, err = x.optString("medium")
	case fSlot7:
		return x.slot7(st)
	case fExtraKeys:
		return x.extraKeys(st)
	case fGroupIdx:
		ev.GroupIdx, err = x.optInt("group_idx", 0)
	case fKind:
		ev.Kind, err = x.optString("kv_cache_spec_kind")
	case fSliding:
		ev.SlidingWindow, err = x.optInt("kv_cache_spec_sliding_window", 0)
	case fLocality:
		ev.Locality, err = x.optString("locality")
	case fOwnership:
		ev.Ownership, err = x.optString("ownership")
	case fSessionID:
		ev.SessionID, err = x.optString("session_id")
	case fCacheSalt:
		ev.CacheSalt, err = x.optString("cache_salt")
	case fMMInfos:
		return x.mmInfos(st)
	case fCopies:
		return x.remainingCopies(ev)
	case fMMKeys:
		return x.mmKeys(st)
	default:
		return x.skip()
	}
	return err
}

// tag reads the event's tag and sets its Type.
func (x *Decoder) tag(ev *Event) error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	if cl != classStr {
		if err := x.skip(); err != nil {
			return err
		}
		return malformed("tag is a msgpack %s, want a string", cl)
	}
	b, err := x.rawBytes()
	if err != nil {
		return err
	}
	if e := names.lookup(b); e != nil && e.typ != TypeUnknown {
		ev.Tag, ev.Type = e.s, e.typ
		return nil
	}
	ev.Tag, ev.Type = intern(b), TypeUnknown
	return &fieldError{messages.ReasonUnknownTag, "unknown tag " + quote(ev.Tag)}
}

// resolve applies the precedence rules once every field is known.
func (x *Decoder) resolve(st *eventState) {
	ev := st.ev
	st.checkCopies()
	st.checkMMKeys()
	if ev.CacheSalt == "" {
		ev.CacheSalt = st.metaSalt
	}
	for _, b := range st.bareExtra {
		if b != ev.LoraName {
			st.setExtraSalt(b)
		}
	}
	if ev.CacheSalt == "" {
		ev.CacheSalt = st.extraSalt
	}
	if ev.SessionID == "" {
		ev.SessionID = st.metaSession
	}
	if ev.Type == TypeUnknown && ev.Tag != "" {
		// An unknown tag outranks field errors: its fields mean nothing to us.
		ev.Reason, ev.Detail = messages.ReasonUnknownTag, "unknown tag "+quote(ev.Tag)
	}
	if ev.Reason == messages.ReasonNone && ev.Type != TypeCleared && ev.BlockHashes == nil {
		ev.Reason, ev.Detail = messages.ReasonMalformed, "block_hashes missing"
	}
	if ev.Reason == messages.ReasonNone && ev.Type == TypeStored && !ev.BlockSize.Ok {
		ev.Reason, ev.Detail = messages.ReasonMalformed, "block_size missing"
	}
}

// quote shortens and quotes untrusted text for a Detail message.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
