package routerevent

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/vmihailenco/msgpack/v5"
)

// A legacy consumer, written as one would have before session_id existed,
// independent of this package: fixed Go structs of the legacy three-field
// RouterEvent (Dynamo's LegacyRouterEvent in protocols.rs' compat tests:
// worker_id, storage_tier, event) with the oldest store-data and block
// shapes, decoded by github.com/vmihailenco/msgpack.
//
// This is how serde-style decoders behave, and rmp_serde's derive decoders
// behave the same way: a map is read by field name with unknown keys
// skipped; an array is read by position and must have exactly as many
// elements as the struct has fields (vmihailenco: "number of fields in
// array-encoded struct has changed"; rmp_serde: "array had incorrect length").
type legacyRouterEvent struct {
	_msgpack    struct{}           `msgpack:",as_array"`
	WorkerID    uint64             `msgpack:"worker_id"`
	StorageTier string             `msgpack:"storage_tier"`
	Event       legacyKvCacheEvent `msgpack:"event"`
}

type legacyKvCacheEvent struct {
	_msgpack struct{}           `msgpack:",as_array"`
	EventID  uint64             `msgpack:"event_id"`
	Data     msgpack.RawMessage `msgpack:"data"` // externally tagged enum, decoded below
	DpRank   uint32             `msgpack:"dp_rank"`
}

type legacyStoreData struct {
	_msgpack   struct{}      `msgpack:",as_array"`
	ParentHash *uint64       `msgpack:"parent_hash"`
	Blocks     []legacyBlock `msgpack:"blocks"`
}

type legacyBlock struct {
	_msgpack   struct{} `msgpack:",as_array"`
	BlockHash  uint64   `msgpack:"block_hash"`
	TokensHash uint64   `msgpack:"tokens_hash"`
}

type legacyRemoveData struct {
	_msgpack    struct{} `msgpack:",as_array"`
	BlockHashes []uint64 `msgpack:"block_hashes"`
}

// legacyView is what the legacy consumer understood of an event.
type legacyView struct {
	WorkerID, EventID uint64
	DpRank            uint32
	Tier, Variant     string
	Parent            *uint64
	Blocks            []legacyBlock
	Removed           []uint64
}

func legacyDecode(b []byte) (legacyView, error) {
	var ev legacyRouterEvent
	if err := msgpack.Unmarshal(b, &ev); err != nil {
		return legacyView{}, err
	}
	v := legacyView{WorkerID: ev.WorkerID, EventID: ev.Event.EventID, DpRank: ev.Event.DpRank, Tier: ev.StorageTier}
	var data any
	if err := msgpack.Unmarshal(ev.Event.Data, &data); err != nil {
		return legacyView{}, err
	}
	if s, ok := data.(string); ok {
		v.Variant = s
		return v, nil
	}
	m, ok := data.(map[string]any)
	if !ok || len(m) != 1 {
		return legacyView{}, fmt.Errorf("data: %#v", data)
	}
	for name, payload := range m {
		v.Variant = name
		raw, err := msgpack.Marshal(payload)
		if err != nil {
			return legacyView{}, err
		}
		switch name {
		case "stored":
			var s legacyStoreData
			err = msgpack.Unmarshal(raw, &s)
			v.Parent, v.Blocks = s.ParentHash, s.Blocks
		case "removed":
			var r legacyRemoveData
			err = msgpack.Unmarshal(raw, &r)
			v.Removed = r.BlockHashes
		default:
			err = fmt.Errorf("unknown variant %q", name)
		}
		if err != nil {
			return legacyView{}, err
		}
	}
	return v, nil
}

// legacyEncodePositional is a legacy producer using positional encoding
// (what rmp_serde::to_vec or vmihailenco's as_array structs write).
func legacyEncodePositional(t *testing.T, ev legacyRouterEvent) []byte {
	t.Helper()
	b, err := msgpack.Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func legacyData(t *testing.T, variant string, payload any) msgpack.RawMessage {
	t.Helper()
	var v any = variant
	if payload != nil {
		v = map[string]any{variant: payload}
	}
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectLegacy is what the legacy consumer must read from ev.
func expectLegacy(ev messages.RouterEvent) legacyView {
	v := legacyView{WorkerID: uint64(ev.WorkerID), EventID: ev.Event.EventID, DpRank: uint32(ev.Event.DpRank),
		Tier: TierName(ev.StorageTier)}
	switch ev.Event.Kind {
	case messages.KindStored:
		v.Variant = "stored"
		if ev.Event.HasParent {
			p := uint64(ev.Event.ParentHash)
			v.Parent = &p
		}
		for _, b := range ev.Event.Blocks {
			v.Blocks = append(v.Blocks, legacyBlock{BlockHash: uint64(b.BlockHash), TokensHash: uint64(b.TokensHash)})
		}
	case messages.KindRemoved:
		v.Variant = "removed"
		for _, h := range ev.Event.Removed {
			v.Removed = append(v.Removed, uint64(h))
		}
	case messages.KindCleared:
		v.Variant = "cleared"
	}
	return v
}

// New bytes, with and without session_id, read by the legacy consumer:
// worker_id, storage tier, event id, data and dp_rank come out right and the
// fields it does not know (session_id, start_position, mm_extra_info) are
// skipped.
func TestLegacyDecoderReadsNewBytes(t *testing.T) {
	noSession := goldenStored
	noSession.SessionID = ""
	cases := map[string]messages.RouterEvent{
		"stored with session_id": goldenStored, "stored without session_id": noSession,
		"removed": goldenRemoved, "cleared": goldenCleared,
	}
	for name, ev := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := legacyDecode(Encode(nil, ev))
			if err != nil {
				t.Fatal(err)
			}
			if want := expectLegacy(ev); !reflect.DeepEqual(got, want) {
				t.Fatalf("legacy consumer read\n %+v\nwant %+v", got, want)
			}
		})
	}
}

// Legacy bytes read by the new decoder: the positional three-field layout
// and the named one as a pre-session producer wrote them.
func TestNewDecoderReadsLegacyBytes(t *testing.T) {
	parent := uint64(0xdeadbeef)
	positionalStored := legacyEncodePositional(t, legacyRouterEvent{
		WorkerID: 7, StorageTier: "host_pinned",
		Event: legacyKvCacheEvent{EventID: 42, DpRank: 1, Data: legacyData(t, "stored", &legacyStoreData{
			ParentHash: &parent,
			Blocks:     []legacyBlock{{BlockHash: 0x1122334455667788, TokensHash: 0x99}, {BlockHash: 3, TokensHash: 0xfedcba9876543210}},
		})},
	})
	if positionalStored[0] != 0x93 {
		t.Fatalf("legacy producer did not write a 3-element array: %x", positionalStored)
	}
	positionalRemoved := legacyEncodePositional(t, legacyRouterEvent{
		WorkerID: 7, StorageTier: "device",
		Event: legacyKvCacheEvent{EventID: 43, DpRank: 1, Data: legacyData(t, "removed", &legacyRemoveData{
			BlockHashes: []uint64{0x1122334455667788, 3},
		})},
	})
	positionalCleared := legacyEncodePositional(t, legacyRouterEvent{
		WorkerID: 7, StorageTier: "device",
		Event: legacyKvCacheEvent{EventID: 44, Data: legacyData(t, "cleared", nil)},
	})
	// The named form of the same events, as rmp_serde::to_vec_named wrote them
	// before session_id (and before start_position / mm_extra_info).
	named := func(tier string, event func(*msgpack.Encoder)) []byte {
		var sb strings.Builder
		enc := msgpack.NewEncoder(&sb)
		_ = enc.EncodeMapLen(3)
		_ = enc.EncodeString("worker_id")
		_ = enc.EncodeUint(7)
		_ = enc.EncodeString("storage_tier")
		_ = enc.EncodeString(tier)
		_ = enc.EncodeString("event")
		event(enc)
		return []byte(sb.String())
	}
	namedStored := named("host_pinned", func(e *msgpack.Encoder) {
		_ = e.EncodeMapLen(3)
		_ = e.EncodeString("event_id")
		_ = e.EncodeUint(42)
		_ = e.EncodeString("data")
		_ = e.EncodeMapLen(1)
		_ = e.EncodeString("stored")
		_ = e.EncodeMapLen(2)
		_ = e.EncodeString("parent_hash")
		_ = e.EncodeUint(0xdeadbeef)
		_ = e.EncodeString("blocks")
		_ = e.EncodeArrayLen(2)
		for _, b := range goldenStored.Event.Blocks {
			_ = e.EncodeMapLen(2)
			_ = e.EncodeString("block_hash")
			_ = e.EncodeUint(uint64(b.BlockHash))
			_ = e.EncodeString("tokens_hash")
			_ = e.EncodeUint(uint64(b.TokensHash))
		}
		_ = e.EncodeString("dp_rank")
		_ = e.EncodeUint(1)
	})

	storedNoSession := goldenStored
	storedNoSession.SessionID = ""
	for name, tc := range map[string]struct {
		in   []byte
		want messages.RouterEvent
	}{
		"positional stored":  {positionalStored, storedNoSession},
		"positional removed": {positionalRemoved, goldenRemoved},
		"positional cleared": {positionalCleared, goldenCleared},
		"named stored":       {namedStored, storedNoSession},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(tc.in)
			if err != nil {
				t.Fatalf("Decode(%x): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode:\n got %+v\nwant %+v", got, tc.want)
			}
			// And the legacy consumer reads its own bytes (the fixture is sound).
			if lv, err := legacyDecode(tc.in); err != nil || !reflect.DeepEqual(lv, expectLegacy(tc.want)) {
				t.Fatalf("legacy consumer on legacy bytes: %+v, %v", lv, err)
			}
			// Round trip through the new format keeps what the legacy bytes said.
			if again, err := Decode(Encode(nil, got)); err != nil || !reflect.DeepEqual(again, tc.want) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		})
	}
}

// Why Encode writes a map and not "the legacy array plus session_id": a
// strict fixed-length positional decoder — vmihailenco's struct decoder, and
// rmp_serde's derive decoder, the two libraries a legacy consumer would use —
// rejects a 4-element array outright, even with nil in the fourth place. Only
// prefix readers that index the first three elements and ignore the rest
// (a hand-written reader, Python's msgpack.unpackb()[0:3], this package's
// Decode) tolerate it. The same strict decoders read a map by name and skip
// the session_id key, which is why the map is the compatible choice.
func TestStrictPositionalDecoderRejectsAppendedField(t *testing.T) {
	three := legacyEncodePositional(t, legacyRouterEvent{
		WorkerID: 7, StorageTier: "device",
		Event: legacyKvCacheEvent{EventID: 44, Data: legacyData(t, "cleared", nil)},
	})
	withSession := append(append([]byte{0x94}, three[1:]...), 0xa1, 's')
	withNil := append(append([]byte{0x94}, three[1:]...), 0xc0)

	for name, in := range map[string][]byte{"session string": withSession, "explicit nil": withNil} {
		t.Run(name, func(t *testing.T) {
			_, err := legacyDecode(in)
			if err == nil || !strings.Contains(err.Error(), "number of fields in array-encoded struct has changed") {
				t.Fatalf("strict legacy decoder: %v, want the array-length error", err)
			}
			if v, err := prefixLegacyDecode(in); err != nil || v.WorkerID != 7 || v.EventID != 44 || v.Tier != "device" {
				t.Fatalf("prefix reader: %+v, %v", v, err)
			}
			ev, err := Decode(in)
			if err != nil || ev.WorkerID != 7 || ev.Event.EventID != 44 || ev.Event.Kind != messages.KindCleared {
				t.Fatalf("Decode: %+v, %v", ev, err)
			}
		})
	}
	// The strict decoder reads the map form of the same event, session and all.
	ev := goldenCleared
	ev.SessionID = "s"
	if v, err := legacyDecode(Encode(nil, ev)); err != nil || v.EventID != 44 || v.Variant != "cleared" {
		t.Fatalf("strict legacy decoder on the map form: %+v, %v", v, err)
	}
}

// prefixLegacyDecode is a tolerant legacy reader: it reads [worker_id,
// storage_tier, [event_id, data, dp_rank, …], …] by position and skips any
// elements after the ones it knows.
func prefixLegacyDecode(b []byte) (legacyView, error) {
	d := msgpack.NewDecoder(strings.NewReader(string(b)))
	n, err := d.DecodeArrayLen()
	if err != nil || n < 3 {
		return legacyView{}, errors.Join(err, fmt.Errorf("router event array of %d", n))
	}
	var v legacyView
	if v.WorkerID, err = d.DecodeUint64(); err != nil {
		return v, err
	}
	if v.Tier, err = d.DecodeString(); err != nil {
		return v, err
	}
	m, err := d.DecodeArrayLen()
	if err != nil || m < 3 {
		return v, errors.Join(err, fmt.Errorf("event array of %d", m))
	}
	if v.EventID, err = d.DecodeUint64(); err != nil {
		return v, err
	}
	if err = d.Skip(); err != nil { // data
		return v, err
	}
	if v.DpRank, err = d.DecodeUint32(); err != nil {
		return v, err
	}
	for range m - 3 {
		if err := d.Skip(); err != nil {
			return v, err
		}
	}
	for range n - 3 {
		if err := d.Skip(); err != nil {
			return v, err
		}
	}
	return v, nil
}
