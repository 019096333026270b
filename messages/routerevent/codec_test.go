package routerevent

// Over 500 lines on purpose: golden bytes, lenient and hostile decoding
// share this file's fixtures (goldens, event builders); split, each part
// would import the others'.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
	"github.com/vmihailenco/msgpack/v5"
)

// The three golden events.
var (
	goldenStored = messages.RouterEvent{
		WorkerID: 7, StorageTier: messages.TierHost, SessionID: "sess-1",
		Event: messages.KvCacheEvent{
			EventID: 42, DpRank: 1, Kind: messages.KindStored,
			HasParent: true, ParentHash: 0xdeadbeef,
			Blocks: []messages.StoredBlock{
				{BlockHash: 0x1122334455667788, TokensHash: 0x99},
				{BlockHash: 3, TokensHash: 0xfedcba9876543210},
			},
		},
	}
	goldenRemoved = messages.RouterEvent{
		WorkerID: 7, StorageTier: messages.TierDevice,
		Event: messages.KvCacheEvent{
			EventID: 43, DpRank: 1, Kind: messages.KindRemoved,
			Removed: []messages.ExternalHash{0x1122334455667788, 3},
		},
	}
	goldenCleared = messages.RouterEvent{
		WorkerID: 7, StorageTier: messages.TierDevice,
		Event: messages.KvCacheEvent{EventID: 44, Kind: messages.KindCleared},
	}
)

// unhex joins hex chunks (spaces allowed) into bytes.
func unhex(t testing.TB, chunks ...string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(strings.Join(chunks, ""), " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The expected bytes, written out value by value. They are what
// rmp_serde::to_vec_named gives Dynamo's RouterEvent with no residency
// domain and no state source (field order as declared, smallest ints).
var (
	hexStored = []string{
		"84",                                 // map, 4 entries
		"a9 776f726b65725f6964 07",           // "worker_id": 7
		"ac 73746f726167655f74696572",        // "storage_tier":
		"ab 686f73745f70696e6e6564",          //   "host_pinned"
		"a5 6576656e74 83",                   // "event": map, 3 entries
		"a8 6576656e745f6964 2a",             //   "event_id": 42
		"a4 64617461 81",                     //   "data": map, 1 entry
		"a6 73746f726564 83",                 //     "stored": map, 3 entries
		"ab 706172656e745f68617368",          //       "parent_hash":
		"ce deadbeef",                        //         0xdeadbeef (uint32)
		"ae 73746172745f706f736974696f6e c0", //       "start_position": nil
		"a6 626c6f636b73 92",                 //       "blocks": array, 2
		"83",                                 //         map, 3 entries
		"aa 626c6f636b5f68617368",            //           "block_hash":
		"cf 1122334455667788",                //             uint64
		"ab 746f6b656e735f68617368 cc 99",    //           "tokens_hash": 0x99 (uint8)
		"ad 6d6d5f65787472615f696e666f c0",   //           "mm_extra_info": nil
		"83",                                 //         map, 3 entries
		"aa 626c6f636b5f68617368 03",         //           "block_hash": 3
		"ab 746f6b656e735f68617368",          //           "tokens_hash":
		"cf fedcba9876543210",                //             uint64
		"ad 6d6d5f65787472615f696e666f c0",   //           "mm_extra_info": nil
		"a7 64705f72616e6b 01",               //   "dp_rank": 1
		"aa 73657373696f6e5f6964",            // "session_id":
		"a6 736573732d31",                    //   "sess-1"
	}
	hexRemoved = []string{
		"83",                             // map, 3 entries (no session_id)
		"a9 776f726b65725f6964 07",       // "worker_id": 7
		"ac 73746f726167655f74696572",    // "storage_tier":
		"a6 646576696365",                //   "device"
		"a5 6576656e74 83",               // "event": map, 3 entries
		"a8 6576656e745f6964 2b",         //   "event_id": 43
		"a4 64617461 81",                 //   "data": map, 1 entry
		"a7 72656d6f766564 81",           //     "removed": map, 1 entry
		"ac 626c6f636b5f686173686573 92", //       "block_hashes": array, 2
		"cf 1122334455667788 03",         //         uint64, 3
		"a7 64705f72616e6b 01",           //   "dp_rank": 1
	}
	hexCleared = []string{
		"83",                          // map, 3 entries
		"a9 776f726b65725f6964 07",    // "worker_id": 7
		"ac 73746f726167655f74696572", // "storage_tier":
		"a6 646576696365",             //   "device"
		"a5 6576656e74 83",            // "event": map, 3 entries
		"a8 6576656e745f6964 2c",      //   "event_id": 44
		"a4 64617461",                 //   "data":
		"a7 636c6561726564",           //     "cleared" (unit variant)
		"a7 64705f72616e6b 00",        //   "dp_rank": 0
	}
)

type golden struct {
	name string
	ev   messages.RouterEvent
	hex  []string
}

func goldens() []golden {
	return []golden{
		{"stored", goldenStored, hexStored},
		{"removed", goldenRemoved, hexRemoved},
		{"cleared", goldenCleared, hexCleared},
	}
}

func TestGoldenBytes(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(t, g.hex...)
			got := Encode(nil, g.ev)
			if !bytes.Equal(got, want) {
				t.Fatalf("Encode:\n got %x\nwant %x", got, want)
			}
			ev, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev, g.ev) {
				t.Fatalf("Decode:\n got %+v\nwant %+v", ev, g.ev)
			}
		})
	}
}

// The golden bytes again, built with an independent msgpack builder, and
// read back by the msgpack library as generic values: the fixtures are what
// their comments say.
func TestGoldenBytesIndependently(t *testing.T) {
	stored := wirefix.New().Map(4).
		Str("worker_id").Uint(7, 0).
		Str("storage_tier").Str("host_pinned").
		Str("event").Map(3).
		Str("event_id").Uint(42, 0).
		Str("data").Map(1).Str("stored").Map(3).
		Str("parent_hash").Uint(0xdeadbeef, 0).
		Str("start_position").Nil().
		Str("blocks").Array(2).
		Map(3).Str("block_hash").Uint(0x1122334455667788, 0).Str("tokens_hash").Uint(0x99, 0).Str("mm_extra_info").Nil().
		Map(3).Str("block_hash").Uint(3, 0).Str("tokens_hash").Uint(0xfedcba9876543210, 0).Str("mm_extra_info").Nil().
		Str("dp_rank").Uint(1, 0).
		Str("session_id").Str("sess-1").Bytes()
	removed := wirefix.New().Map(3).
		Str("worker_id").Uint(7, 0).
		Str("storage_tier").Str("device").
		Str("event").Map(3).
		Str("event_id").Uint(43, 0).
		Str("data").Map(1).Str("removed").Map(1).Str("block_hashes").Uints(0x1122334455667788, 3).
		Str("dp_rank").Uint(1, 0).Bytes()
	cleared := wirefix.New().Map(3).
		Str("worker_id").Uint(7, 0).
		Str("storage_tier").Str("device").
		Str("event").Map(3).
		Str("event_id").Uint(44, 0).
		Str("data").Str("cleared").
		Str("dp_rank").Uint(0, 0).Bytes()
	for i, want := range [][]byte{stored, removed, cleared} {
		g := goldens()[i]
		if got := unhex(t, g.hex...); !bytes.Equal(got, want) {
			t.Errorf("%s: written-out hex differs from the built fixture:\n hex %x\nbuilt %x", g.name, got, want)
		}
	}

	var v map[string]any
	if err := msgpack.Unmarshal(stored, &v); err != nil {
		t.Fatal(err)
	}
	event := v["event"].(map[string]any)
	data := event["data"].(map[string]any)["stored"].(map[string]any)
	blocks := data["blocks"].([]any)
	if v["worker_id"] != int8(7) || v["storage_tier"] != "host_pinned" || v["session_id"] != "sess-1" ||
		event["event_id"] != int8(42) || event["dp_rank"] != int8(1) ||
		data["parent_hash"] != uint32(0xdeadbeef) || data["start_position"] != nil || len(blocks) != 2 ||
		blocks[1].(map[string]any)["tokens_hash"] != uint64(0xfedcba9876543210) {
		t.Fatalf("generic decode of the stored fixture: %#v", v)
	}
}

func TestRoundTrip(t *testing.T) {
	withSession := goldenStored
	noSession := goldenStored
	noSession.SessionID = ""
	long := goldenRemoved
	long.SessionID = strings.Repeat("s", 300) // str16
	many := goldenStored
	many.WorkerID = math.MaxUint64
	many.Event.EventID = math.MaxUint64
	many.Event.DpRank = math.MaxUint32
	many.Event.HasParent, many.Event.ParentHash = false, 0
	many.Event.Blocks = nil
	for i := range 70_000 { // array32 past the uint16 header
		many.Event.Blocks = append(many.Event.Blocks, messages.StoredBlock{BlockHash: messages.ExternalHash(i), TokensHash: messages.LocalHash(i * 7)})
	}
	many.Event.Blocks = many.Event.Blocks[:1<<16] // exactly the cap, array16
	emptyStore := goldenStored
	emptyStore.Event.Blocks = nil
	emptyRemove := goldenRemoved
	emptyRemove.Event.Removed = nil
	disk := goldenCleared
	disk.StorageTier = messages.TierDisk
	ext := goldenCleared
	ext.StorageTier = messages.TierExternal

	for name, ev := range map[string]messages.RouterEvent{
		"stored with session": withSession, "stored without session": noSession,
		"removed with long session": long, "removed": goldenRemoved, "cleared": goldenCleared,
		"max values and 65536 blocks": many, "empty store": emptyStore, "empty remove": emptyRemove,
		"disk tier": disk, "external tier": ext,
	} {
		t.Run(name, func(t *testing.T) {
			if err := Validate(ev); err != nil {
				t.Fatal(err)
			}
			b := Encode(nil, ev)
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, ev) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, ev)
			}
			if again := Encode(nil, got); !bytes.Equal(again, b) {
				t.Fatal("re-encoding differs")
			}
		})
	}
}

// Dynamo's StorageTier (protocols.rs: Device, HostPinned, Disk, External,
// serde snake_case) against messages.StorageTier.
func TestTierMapping(t *testing.T) {
	for _, tc := range []struct {
		tier messages.StorageTier
		name string
	}{
		{messages.TierDevice, "device"},
		{messages.TierHost, "host_pinned"},
		{messages.TierDisk, "disk"},
		{messages.TierExternal, "external"},
	} {
		if got := TierName(tc.tier); got != tc.name {
			t.Errorf("TierName(%v) = %q, want %q", tc.tier, got, tc.name)
		}
		if got, ok := ParseTier(tc.name); !ok || got != tc.tier {
			t.Errorf("ParseTier(%q) = %v, %v", tc.name, got, ok)
		}
		ev := goldenCleared
		ev.StorageTier = tc.tier
		b := Encode(nil, ev)
		if !bytes.Contains(b, append([]byte{0xa0 | byte(len(tc.name))}, tc.name...)) {
			t.Errorf("%v: encoding lacks %q", tc.tier, tc.name)
		}
	}
	for _, name := range []string{"Device", "GPU", "host", "HostPinned", ""} {
		if _, ok := ParseTier(name); ok {
			t.Errorf("ParseTier(%q) accepted", name)
		}
	}
	if TierName(4) != "" {
		t.Error("TierName(4) is not empty")
	}
}

func TestValidate(t *testing.T) {
	badTier := goldenCleared
	badTier.StorageTier = 9
	badKind := goldenCleared
	badKind.Event.Kind = 0
	longSession := goldenCleared
	longSession.SessionID = strings.Repeat("x", DefaultLimits().MaxSessionBytes+1)
	tooMany := goldenRemoved
	tooMany.Event.Removed = make([]messages.ExternalHash, DefaultLimits().MaxBlocks+1)
	for name, tc := range map[string]struct {
		ev   messages.RouterEvent
		want error
	}{
		"tier": {badTier, ErrUnsupported}, "kind": {badKind, ErrUnsupported},
		"session": {longSession, ErrLimit}, "hashes": {tooMany, ErrLimit},
	} {
		err := Validate(tc.ev)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Validate = %v, want %v", name, err, tc.want)
		}
		// What Validate rejects, Decode rejects too: Encode never produces
		// bytes that read back as something else.
		if _, err := Decode(Encode(nil, tc.ev)); err == nil {
			t.Errorf("%s: Decode accepted an event Validate rejects", name)
		}
	}
}

func fx() *wirefix.B { return wirefix.New() }

// storedBody appends {"stored": {"parent_hash": 5, "blocks": [{1, 2}]}}.
func storedBody(b *wirefix.B) *wirefix.B {
	return b.Map(1).Str("stored").Map(2).Str("parent_hash").Uint(5, 0).
		Str("blocks").Array(1).Map(2).Str("block_hash").Uint(1, 0).Str("tokens_hash").Uint(2, 0)
}

// want is the event storedBody describes, on worker 7, event 42, rank 1.
func want(tier messages.StorageTier, session string) messages.RouterEvent {
	return messages.RouterEvent{
		WorkerID: 7, StorageTier: tier, SessionID: session,
		Event: messages.KvCacheEvent{EventID: 42, DpRank: 1, Kind: messages.KindStored,
			HasParent: true, ParentHash: 5, Blocks: []messages.StoredBlock{{BlockHash: 1, TokensHash: 2}}},
	}
}

func namedEvent(b *wirefix.B) *wirefix.B {
	return storedBody(b.Map(3).Str("event_id").Uint(42, 0).Str("data")).Str("dp_rank").Uint(1, 0)
}

// positionalEvent appends [42, {"stored": [5, nil, [[1, 2, nil]]]}, 1].
func positionalEvent(b *wirefix.B) *wirefix.B {
	return b.Array(3).Uint(42, 0).Map(1).Str("stored").Array(3).Uint(5, 0).Nil().
		Array(1).Array(3).Uint(1, 0).Uint(2, 0).Nil().Uint(1, 0)
}

func TestDecodeLenient(t *testing.T) {
	cleared := func(tier messages.StorageTier, rank messages.DpRank) messages.RouterEvent {
		return messages.RouterEvent{WorkerID: 7, StorageTier: tier,
			Event: messages.KvCacheEvent{EventID: 42, DpRank: rank, Kind: messages.KindCleared}}
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want messages.RouterEvent
	}{
		{"named, legacy three fields (no session_id, start_position, mm_extra_info)",
			namedEvent(fx().Map(3).Str("worker_id").Uint(7, 0).Str("storage_tier").Str("host_pinned").Str("event")).Bytes(),
			want(messages.TierHost, "")},
		{"named, before storage_tier and dp_rank",
			storedBody(fx().Map(2).Str("worker_id").Uint(7, 0).Str("event").Map(2).Str("event_id").Uint(42, 0).Str("data")).Bytes(),
			func() messages.RouterEvent { w := want(messages.TierDevice, ""); w.Event.DpRank = 0; return w }()},
		{"named, current Dynamo: residency_domain worker, state_source nil, keys reordered, unknown keys",
			namedEvent(fx().Map(7).Str("session_id").Str("s").Str("future").Array(2).Map(1).Str("x").F64(1).Bin([]byte{1}).
				Str("residency_domain").Str("worker").Str("event")).
				Str("state_source").Nil().Str("storage_tier").Str("disk").Str("worker_id").Uint(7, 64).Bytes(),
			want(messages.TierDisk, "s")},
		{"named, session_id nil",
			namedEvent(fx().Map(4).Str("worker_id").Uint(7, 0).Str("storage_tier").Str("device").Str("event")).Str("session_id").Nil().Bytes(),
			want(messages.TierDevice, "")},
		{"named, session_id empty",
			namedEvent(fx().Map(4).Str("worker_id").Uint(7, 0).Str("storage_tier").Str("device").Str("event")).Str("session_id").Str("").Bytes(),
			want(messages.TierDevice, "")},
		{"named, Dynamo's unattributed session",
			namedEvent(fx().Map(4).Str("worker_id").Uint(7, 0).Str("storage_tier").Str("device").Str("event")).Str("session_id").Str(UnattributedSessionID).Bytes(),
			want(messages.TierDevice, "")},
		{"named, non-str key skipped",
			namedEvent(fx().Map(4).Uint(1, 0).Str("x").Str("worker_id").Uint(7, 0).Str("storage_tier").Str("device").Str("event")).Bytes(),
			want(messages.TierDevice, "")},
		{"named, map16/array16 headers and wide ints",
			fx().Raw(0xde, 0, 2).Str("worker_id").Uint(7, 32).Str("event").Raw(0xde, 0, 3).
				Str("dp_rank").Uint(1, 16).Str("event_id").Uint(42, 64).
				Str("data").Map(1).Str("stored").Map(2).Str("blocks").Raw(0xdc, 0, 1).Map(2).Str("tokens_hash").Uint(2, 8).Str("block_hash").Int(1, 64).
				Str("parent_hash").Uint(5, 16).Bytes(),
			want(messages.TierDevice, "")},
		{"positional, legacy three fields",
			positionalEvent(fx().Array(3).Uint(7, 0).Str("host_pinned")).Bytes(),
			want(messages.TierHost, "")},
		{"positional, older store data [parent, blocks] and blocks [hash, hash]",
			fx().Array(3).Uint(7, 0).Str("host_pinned").Array(3).Uint(42, 0).Map(1).Str("stored").Array(2).Uint(5, 0).
				Array(1).Array(2).Uint(1, 0).Uint(2, 0).Uint(1, 0).Bytes(),
			want(messages.TierHost, "")},
		{"positional, session_id appended",
			positionalEvent(fx().Array(4).Uint(7, 0).Str("host_pinned")).Str("s").Bytes(),
			want(messages.TierHost, "s")},
		{"positional, explicit nil session_id",
			positionalEvent(fx().Array(4).Uint(7, 0).Str("host_pinned")).Nil().Bytes(),
			want(messages.TierHost, "")},
		{"positional, extra trailing elements everywhere",
			fx().Array(6).Uint(7, 0).Str("host_pinned").
				Array(5).Uint(42, 0).Map(1).Str("stored").Array(4).Uint(5, 0).Nil().
				Array(1).Array(4).Uint(1, 0).Uint(2, 0).Nil().Str("more").Map(0).Uint(1, 0).Str("x").Array(0).
				Str("s").Map(1).Str("k").Array(1).Nil().Uint(9, 0).Bytes(),
			want(messages.TierHost, "s")},
		{"positional, before storage_tier [worker_id, event]",
			fx().Array(2).Uint(7, 0).Array(2).Uint(42, 0).Str("cleared").Bytes(),
			cleared(messages.TierDevice, 0)},
		{"tier by variant index, data by variant index",
			fx().Map(3).Str("worker_id").Uint(7, 0).Str("storage_tier").Uint(1, 0).
				Str("event").Array(3).Uint(42, 0).Uint(2, 0).Uint(1, 0).Bytes(),
			cleared(messages.TierHost, 1)},
		{"tier nil, dp_rank nil",
			fx().Map(3).Str("worker_id").Uint(7, 0).Str("storage_tier").Nil().
				Str("event").Map(3).Str("event_id").Uint(42, 0).Str("data").Str("cleared").Str("dp_rank").Nil().Bytes(),
			cleared(messages.TierDevice, 0)},
		{"cleared written with a payload",
			fx().Map(2).Str("worker_id").Uint(7, 0).
				Str("event").Map(2).Str("event_id").Uint(42, 0).Str("data").Map(1).Str("cleared").Nil().Bytes(),
			cleared(messages.TierDevice, 0)},
		{"stored by variant index, signed hashes keep their bit pattern",
			fx().Map(2).Str("worker_id").Uint(7, 0).
				Str("event").Map(2).Str("event_id").Uint(42, 0).Str("data").Map(1).Uint(0, 0).
				Map(2).Str("parent_hash").Int(-1, 0).Str("blocks").Array(1).Array(2).Int(-2, 64).Int(-3, 8).Bytes(),
			messages.RouterEvent{WorkerID: 7, Event: messages.KvCacheEvent{EventID: 42, Kind: messages.KindStored,
				HasParent: true, ParentHash: math.MaxUint64,
				Blocks: []messages.StoredBlock{{BlockHash: math.MaxUint64 - 1, TokensHash: math.MaxUint64 - 2}}}}},
		{"removed, positional payload with extra element",
			fx().Map(2).Str("worker_id").Uint(7, 0).
				Str("event").Map(2).Str("event_id").Uint(42, 0).Str("data").Map(1).Str("removed").
				Array(2).Array(2).Uint(1, 0).Int(-1, 16).Str("x").Bytes(),
			messages.RouterEvent{WorkerID: 7, Event: messages.KvCacheEvent{EventID: 42, Kind: messages.KindRemoved,
				Removed: []messages.ExternalHash{1, math.MaxUint64}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.in)
			if err != nil {
				t.Fatalf("Decode(%x): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decode(%x):\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

func nest(depth int) *wirefix.B {
	b := fx().Map(3).Str("worker_id").Uint(7, 0).Str("junk")
	for range depth {
		b.Array(1)
	}
	b.Nil()
	return b.Str("event").Array(2).Uint(1, 0).Str("cleared")
}

func TestDecodeHostile(t *testing.T) {
	small := Limits{MaxBlocks: 2, MaxSessionBytes: 4, MaxDepth: 8}
	head := func() *wirefix.B { return fx().Map(3).Str("worker_id").Uint(7, 0).Str("storage_tier").Str("device") }
	ev := func(body func(*wirefix.B) *wirefix.B) []byte {
		return body(head().Str("event").Map(2).Str("event_id").Uint(1, 0).Str("data")).Bytes()
	}
	for _, tc := range []struct {
		name   string
		in     []byte
		lim    Limits
		want   error
		detail string // a substring of the message
	}{
		{"empty", nil, Limits{}, ErrTruncated, ""},
		{"invalid code", []byte{0xc1}, Limits{}, ErrMalformed, "invalid code 0xc1"},
		{"top-level int", []byte{0x07}, Limits{}, ErrMalformed, "want map or array, got int"},
		{"map32 claims 4G entries", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0x00}, Limits{}, ErrTruncated, "map declares 4294967295 entries"},
		{"array32 claims 4G blocks", ev(func(b *wirefix.B) *wirefix.B {
			return b.Map(1).Str("stored").Map(1).Str("blocks").Raw(0xdd, 0xff, 0xff, 0xff, 0xff, 0x90)
		}), Limits{}, ErrTruncated, "blocks: array declares"},
		{"str32 claims 4G bytes in an unknown key", head().Raw(0xdb, 0xff, 0xff, 0xff, 0xff).Bytes(), Limits{}, ErrTruncated, "str declares"},
		{"bin32 claims 4G bytes in a skipped value", fx().Map(1).Str("x").Raw(0xc6, 0xff, 0xff, 0xff, 0xff, 0).Bytes(), Limits{}, ErrTruncated, ""},
		{"ext32 claims 4G bytes in a skipped value", fx().Map(1).Str("x").Raw(0xc9, 0xff, 0xff, 0xff, 0xff, 1).Bytes(), Limits{}, ErrTruncated, ""},
		{"blocks over the cap", ev(func(b *wirefix.B) *wirefix.B {
			return b.Map(1).Str("stored").Map(1).Str("blocks").Array(3).Array(2).Uint(1, 0).Uint(1, 0).Array(2).Uint(2, 0).Uint(2, 0).Array(2).Uint(3, 0).Uint(3, 0)
		}), small, ErrLimit, "3 blocks exceed the 2-block cap"},
		{"hashes over the cap", ev(func(b *wirefix.B) *wirefix.B {
			return b.Map(1).Str("removed").Array(1).Uints(1, 2, 3)
		}), small, ErrLimit, "3 hashes exceed"},
		{"session over the cap", head().Str("session_id").Str("12345").Bytes(), small, ErrLimit, "session_id: 5 bytes exceed the 4-byte cap"},
		{"nesting past MaxDepth", nest(9).Bytes(), small, ErrLimit, "nested deeper than 8"},
		{"nesting past the default MaxDepth", nest(33).Bytes(), Limits{}, ErrLimit, "nested deeper than 32"},
		{"missing worker_id", fx().Map(1).Str("event").Array(2).Uint(1, 0).Str("cleared").Bytes(), Limits{}, ErrMalformed, "worker_id: missing"},
		{"map ends before its declared entries", head().Bytes(), Limits{}, ErrTruncated, ""},
		{"missing event", fx().Map(1).Str("worker_id").Uint(7, 0).Bytes(), Limits{}, ErrMalformed, "event: missing"},
		{"missing event_id", head().Str("event").Map(1).Str("data").Str("cleared").Bytes(), Limits{}, ErrMalformed, "event: event_id: missing"},
		{"missing data", head().Str("event").Map(1).Str("event_id").Uint(1, 0).Bytes(), Limits{}, ErrMalformed, "event: data: missing"},
		{"missing blocks", ev(func(b *wirefix.B) *wirefix.B { return b.Map(1).Str("stored").Map(1).Str("parent_hash").Nil() }), Limits{}, ErrMalformed, "stored: blocks: missing"},
		{"missing tokens_hash", ev(func(b *wirefix.B) *wirefix.B {
			return b.Map(1).Str("stored").Map(1).Str("blocks").Array(2).Array(2).Uint(1, 0).Uint(1, 0).Map(1).Str("block_hash").Uint(1, 0)
		}), Limits{}, ErrMalformed, "event: data: stored: blocks[1]: tokens_hash: missing"},
		{"missing block_hashes", ev(func(b *wirefix.B) *wirefix.B { return b.Map(1).Str("removed").Map(0) }), Limits{}, ErrMalformed, "removed: block_hashes: missing"},
		{"repeated worker_id", fx().Map(2).Str("worker_id").Uint(7, 0).Str("worker_id").Uint(8, 0).Bytes(), Limits{}, ErrMalformed, "worker_id: repeated"},
		{"repeated blocks", ev(func(b *wirefix.B) *wirefix.B {
			return b.Map(1).Str("stored").Map(2).Str("blocks").Array(0).Str("blocks").Array(0)
		}), Limits{}, ErrMalformed, "blocks: repeated"},
		{"negative worker_id", fx().Map(1).Str("worker_id").Int(-1, 0).Bytes(), Limits{}, ErrMalformed, "worker_id: -1 is negative"},
		{"worker_id as str", fx().Map(1).Str("worker_id").Str("7").Bytes(), Limits{}, ErrMalformed, "worker_id: want int, got str"},
		{"dp_rank over uint32", head().Str("event").Array(3).Uint(1, 0).Str("cleared").Uint(1<<32, 0).Bytes(), Limits{}, ErrMalformed, "dp_rank: 4294967296 exceeds"},
		{"unknown tier", fx().Map(1).Str("storage_tier").Str("hbm").Bytes(), Limits{}, ErrUnsupported, `unknown tier "hbm"`},
		{"tier index out of range", fx().Map(1).Str("storage_tier").Uint(4, 0).Bytes(), Limits{}, ErrUnsupported, "variant index 4"},
		{"cache-owner residency domain", fx().Map(1).Str("residency_domain").Str("cache_owner").Bytes(), Limits{}, ErrUnsupported, "residency_domain"},
		{"nil residency domain", fx().Map(1).Str("residency_domain").Nil().Bytes(), Limits{}, ErrMalformed, "residency_domain: want str, got nil"},
		{"unknown variant", ev(func(b *wirefix.B) *wirefix.B { return b.Map(1).Str("reused").Nil() }), Limits{}, ErrUnsupported, `unknown variant "reused"`},
		{"unknown variant index", ev(func(b *wirefix.B) *wirefix.B { return b.Uint(3, 0) }), Limits{}, ErrUnsupported, "unknown variant index 3"},
		{"stored without payload", ev(func(b *wirefix.B) *wirefix.B { return b.Str("stored") }), Limits{}, ErrMalformed, "variant stored needs a payload"},
		{"enum map of two entries", ev(func(b *wirefix.B) *wirefix.B { return b.Map(2).Str("cleared").Nil().Str("cleared").Nil() }), Limits{}, ErrMalformed, "enum map has 2 entries"},
		{"hash as float", ev(func(b *wirefix.B) *wirefix.B { return b.Map(1).Str("removed").Array(1).Array(1).F64(1) }), Limits{}, ErrMalformed, "block_hashes[0]: want int, got float"},
		{"session as int", head().Str("session_id").Uint(1, 0).Bytes(), Limits{}, ErrMalformed, "session_id: want str or nil, got int"},
		{"trailing bytes", append(Encode(nil, goldenCleared), 0xc0), Limits{}, ErrMalformed, "1 bytes after the event"},
		{"array of one element", fx().Array(1).Uint(7, 0).Bytes(), Limits{}, ErrMalformed, "want at least 2"},
		{"array [worker_id, tier] without event", fx().Array(2).Uint(7, 0).Str("device").Bytes(), Limits{}, ErrMalformed, "want at least 3"},
		{"batch of router events is not one event", fx().Array(2).Raw(Encode(nil, goldenCleared)...).Raw(Encode(nil, goldenCleared)...).Bytes(), Limits{}, ErrMalformed, "worker_id: want int, got map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDecoder(tc.lim).Decode(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode(%x) = %v, want %v", tc.in, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "routerevent: ") || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("error %q lacks %q", err, tc.detail)
			}
		})
	}
}

// Every proper prefix of a valid event is truncated, never anything else.
func TestDecodePrefixes(t *testing.T) {
	for _, g := range goldens() {
		b := unhex(t, g.hex...)
		for n := range len(b) {
			if _, err := Decode(b[:n]); !errors.Is(err, ErrTruncated) {
				t.Fatalf("%s[:%d]: %v, want truncated", g.name, n, err)
			}
		}
	}
}

// A reused decoder gives the same events as a fresh one and does not
// allocate once its buffers and session cache are warm.
func TestDecoderReuse(t *testing.T) {
	d := NewDecoder(Limits{})
	for range 2 {
		for _, g := range goldens() {
			got, err := d.Decode(unhex(t, g.hex...))
			if err != nil || !reflect.DeepEqual(got, g.ev) {
				t.Fatalf("%s: %+v, %v", g.name, got, err)
			}
		}
	}
	in := Encode(nil, goldenStored)
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(in) }); n != 0 {
		t.Errorf("Decoder.Decode allocates %.1f times per event", n)
	}
	dst := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { dst = Encode(dst[:0], goldenStored) }); n != 0 {
		t.Errorf("Encode allocates %.1f times per event", n)
	}
}
