package routerevent

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// The library's low-level calls are lenient where Decode must not be:
// DecodeInt64/DecodeUint64 read nil as 0, DecodeArrayLen/DecodeMapLen read
// nil as an absent container and DecodeMapLen steps over an ext header, and
// DecodeBytesLen takes bin for str. The reader checks each code first.
func TestDecodeRejectsLibraryLeniency(t *testing.T) {
	// head starts a router event map; data continues it up to the data value.
	head := func() *wirefix.B { return fx().Map(3).Str("worker_id").Uint(7, 0).Str("storage_tier").Str("device") }
	data := func() *wirefix.B { return head().Str("event").Map(2).Str("event_id").Uint(1, 0).Str("data") }
	for name, tc := range map[string]struct {
		in     []byte
		detail string // all are ErrMalformed
	}{
		"worker_id nil":                      {fx().Map(1).Str("worker_id").Nil().Bytes(), "worker_id: want int, got nil"},
		"event_id nil":                       {head().Str("event").Array(2).Nil().Str("cleared").Bytes(), "event_id: want int, got nil"},
		"block hash nil":                     {data().Map(1).Str("stored").Map(1).Str("blocks").Array(1).Array(2).Nil().Uint(1, 0).Bytes(), "blocks[0]: block_hash: want int, got nil"},
		"removed hash nil":                   {data().Map(1).Str("removed").Array(1).Array(1).Nil().Bytes(), "block_hashes[0]: want int, got nil"},
		"blocks nil":                         {data().Map(1).Str("stored").Map(1).Str("blocks").Nil().Bytes(), "blocks: want array, got nil"},
		"event nil":                          {head().Str("event").Nil().Bytes(), "event: want map or array, got nil"},
		"store data nil":                     {data().Map(1).Str("stored").Nil().Bytes(), "stored: want map or array, got nil"},
		"top-level map behind an ext header": {append([]byte{0xd4, 0x01}, Encode(nil, goldenCleared)...), "want map or array, got ext"},
		"event map behind an ext header": {head().Str("event").Raw(0xc7, 0x00, 0x05).
			Map(2).Str("event_id").Uint(1, 0).Str("data").Str("cleared").Bytes(), "event: want map or array, got ext"},
		"tier as bin":             {fx().Map(1).Str("storage_tier").Bin([]byte("device")).Bytes(), "storage_tier: want str, int or nil, got bin"},
		"session as bin":          {head().Str("session_id").Bin([]byte("s")).Bytes(), "session_id: want str or nil, got bin"},
		"variant as bin":          {data().Bin([]byte("cleared")).Bytes(), "data: want variant name or index, got bin"},
		"residency domain as bin": {fx().Map(1).Str("residency_domain").Bin([]byte("worker")).Bytes(), "residency_domain: want str, got bin"},
		"bin key is not a field name": {fx().Map(2).Bin([]byte("worker_id")).Uint(7, 0).
			Str("event").Array(2).Uint(1, 0).Str("cleared").Bytes(), "worker_id: missing"},
	} {
		if _, err := Decode(tc.in); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%s: Decode(%x) = %v, want malformed with %q", name, tc.in, err, tc.detail)
		}
	}
}

// Skipping never goes through the library's Skip for strings, bins or
// extensions (it would read them into a buffer of their size) nor for
// containers (it recurses): large skipped values cost no allocation, and
// deep nesting ends at MaxDepth however deep it goes.
func TestSkipReadsNothingIntoMemory(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, 1<<20)
	in := namedEvent(fx().Map(6).
		Str("worker_id").Uint(7, 0).
		Str("huge_bin").Bin(big).
		Str(strings.Repeat("k", 70_000)).Str(string(big[:100_000])). // str32 key, str32 value
		Str("ext").Raw(0xc9, 0x00, 0x01, 0x00, 0x00, 0x05).Raw(big[:1<<16]...).
		Str("nested").Array(1).Array(2).Map(1).Bin(big[:300]).Array(3).F32(1).F64(2).Bool(true).Raw(0xd8, 0x01).Raw(big[:16]...).
		Str("event")).Bytes()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := NewDecoder(Limits{})
	got, err := d.Decode(in)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if w := want(messages.TierDevice, ""); !reflect.DeepEqual(got, w) {
		t.Fatalf("got %+v\nwant %+v", got, w)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
		t.Errorf("a fresh decoder allocated %d bytes to skip %d", n, len(in))
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = d.Decode(in) }); n != 0 {
		t.Errorf("skipping large values allocates %.1f times", n)
	}

	deep := nest(1 << 20).Bytes()
	if _, err := d.Decode(deep); !errors.Is(err, ErrLimit) {
		t.Fatalf("a million nested arrays: %v, want the depth limit", err)
	}
}

// Decode's events own their memory although its decoders are pooled.
func TestDecodeOwnsMemory(t *testing.T) {
	first, err := Decode(Encode(nil, goldenStored))
	if err != nil {
		t.Fatal(err)
	}
	removed, err := Decode(Encode(nil, goldenRemoved))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		other := benchEvent()
		other.Event.Blocks[0].BlockHash = 1
		if _, err := Decode(Encode(nil, other)); err != nil {
			t.Fatal(err)
		}
		other = goldenRemoved
		other.Event.Removed = []messages.ExternalHash{9, 9, 9}
		if _, err := Decode(Encode(nil, other)); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(first, goldenStored) || !reflect.DeepEqual(removed, goldenRemoved) {
		t.Fatalf("later decodes changed earlier events:\n%+v\n%+v", first, removed)
	}
}

// A zero Decoder, against its doc, decodes as NewDecoder(Limits{}) rather
// than panicking.
func TestZeroDecoder(t *testing.T) {
	var d Decoder
	for _, g := range goldens() {
		if got, err := d.Decode(unhex(t, g.hex...)); err != nil || !reflect.DeepEqual(got, g.ev) {
			t.Fatalf("%s: %+v, %v", g.name, got, err)
		}
	}
	if _, err := d.Decode(nest(33).Bytes()); !errors.Is(err, ErrLimit) {
		t.Fatalf("zero Decoder nesting: %v, want the default depth limit", err)
	}
}
