package simengine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// checker decodes payloads with kvrouter's own decoder and normalizer (one
// per stream, fed in order, as a listener would) and compares the result
// with the batch that was encoded.
type checker struct {
	t      *testing.T
	enc    Encoding
	dec    *wire.Decoder
	norm   *normalizer.Normalizer
	bs     int
	hasher blockhash.Hasher
}

func newChecker(t *testing.T, enc Encoding, bs int) *checker {
	a, err := engine.Lookup(enc.Engine())
	if err != nil {
		t.Fatal(err)
	}
	return &checker{t: t, enc: enc, dec: a.NewDecoder(wire.DefaultLimits()), bs: bs,
		norm: normalizer.New(normalizer.Config{Worker: 1, BlockSize: bs})}
}

// check asserts that payload decodes and normalizes into exactly want.
func (c *checker) check(payload []byte, want Batch) {
	c.t.Helper()
	b, err := c.dec.Decode(payload)
	if err != nil {
		c.t.Fatalf("%s: decode: %v", c.enc, err)
	}
	if b.TS != want.TS || b.Lost != 0 || len(b.Events) != len(want.Events) {
		c.t.Fatalf("%s: batch ts %v lost %d events %d; want ts %v, %d events", c.enc, b.TS, b.Lost, len(b.Events), want.TS, len(want.Events))
	}
	if b.DpRank.Ok == want.NilRank || (b.DpRank.Ok && b.DpRank.V != int64(want.DpRank)) {
		c.t.Fatalf("%s: batch rank %+v, want %d (nil: %v)", c.enc, b.DpRank, want.DpRank, want.NilRank)
	}
	outs := c.norm.Batch(b, nil)
	for i, o := range outs {
		ev, w := &b.Events[i], &want.Events[i]
		if !o.Accepted() {
			c.t.Fatalf("%s: event %d (%s) rejected: %v %s", c.enc, i, w.Kind, o.Reason, o.Detail)
		}
		p := o.Event
		if p.Placement.Tier != messages.TierDevice || p.Event.DpRank != messages.DpRank(want.DpRank) && !want.NilRank {
			c.t.Fatalf("%s: event %d placement %+v", c.enc, i, p.Placement)
		}
		if ev.Tag != w.Kind.String() {
			c.t.Fatalf("%s: event %d tag %q, want %q", c.enc, i, ev.Tag, w.Kind)
		}
		switch w.Kind {
		case EventCleared:
			if p.Event.Kind != messages.KindCleared {
				c.t.Fatalf("%s: event %d kind %v, want cleared", c.enc, i, p.Event.Kind)
			}
		case EventRemoved:
			got := make([]uint64, len(p.Event.Removed))
			for j, h := range p.Event.Removed {
				got[j] = uint64(h)
			}
			if p.Event.Kind != messages.KindRemoved || !slices.Equal(got, w.Hashes) {
				c.t.Fatalf("%s: event %d removed %x, want %x", c.enc, i, got, w.Hashes)
			}
		case EventStored:
			c.stored(i, ev, p, w)
		}
	}
}

func (c *checker) stored(i int, ev *wire.Event, p messages.PlacementEvent, w *Event) {
	c.t.Helper()
	local := c.hasher.Hash(nil, w.Tokens, c.bs, blockhash.Options{Seed: blockhash.NamespaceSeed(w.LoraName, w.CacheSalt)})
	if p.Event.Kind != messages.KindStored || len(p.Event.Blocks) != len(w.Hashes) {
		c.t.Fatalf("%s: event %d: %d blocks, want %d", c.enc, i, len(p.Event.Blocks), len(w.Hashes))
	}
	for j, blk := range p.Event.Blocks {
		if uint64(blk.BlockHash) != w.Hashes[j] || uint64(blk.TokensHash) != local[j] {
			c.t.Fatalf("%s: event %d block %d = %+v, want engine %#x local %#x (lora %q salt %q)",
				c.enc, i, j, blk, w.Hashes[j], local[j], w.LoraName, w.CacheSalt)
		}
	}
	if p.Event.HasParent != w.HasParent || uint64(p.Event.ParentHash) != w.Parent {
		c.t.Fatalf("%s: event %d parent %v/%#x, want %v/%#x", c.enc, i, p.Event.HasParent, p.Event.ParentHash, w.HasParent, w.Parent)
	}
	if p.SessionID != w.SessionID || ev.LoraName != w.LoraName || !slices.Equal(ev.Tokens, w.Tokens) {
		c.t.Fatalf("%s: event %d session %q lora %q, want %q %q", c.enc, i, p.SessionID, ev.LoraName, w.SessionID, w.LoraName)
	}
	if c.enc != EncodingSGLang && (ev.Kind != mainKind || !ev.GroupIdx.Ok || ev.GroupIdx.V != 0) {
		c.t.Fatalf("%s: event %d group %+v kind %q, want 0 %q", c.enc, i, ev.GroupIdx, ev.Kind, mainKind)
	}
}

// TestEncodeRoundTripThroughKvrouter serves random requests (shared
// prefixes, LoRA, salts, sessions, evictions, clears) on a small cache and
// checks every batch, in every encoding, through kvrouter's decoder and
// normalizer.
func TestEncodeRoundTripThroughKvrouter(t *testing.T) {
	for _, enc := range Encodings() {
		t.Run(string(enc), func(t *testing.T) {
			const bs = 4
			rng := rand.New(rand.NewPCG(7, 7))
			cache := mustCache(t, Config{BlockSize: bs, CapacityBlocks: 24, DpRank: 2})
			x, err := NewEncoder(enc)
			if err != nil {
				t.Fatal(err)
			}
			c := newChecker(t, enc, bs)
			var sawEvict, sawSalt, sawLora, sawSession, sawContinuation bool
			for step := 0; step < 400; step++ {
				b := Batch{TS: 1764400000 + float64(step)/8, DpRank: 2, NilRank: enc == EncodingSGLang && step%3 == 0}
				if step%97 == 96 {
					b.Events = cache.Clear()
				} else {
					r := Request{Tokens: make([]uint32, rng.IntN(10*bs))}
					for i := 2 * bs; i < len(r.Tokens); i++ { // a shared 2-block "system prompt" of zeros
						r.Tokens[i] = uint32(rng.IntN(3)) * 40000 // 40000 and 80000 need uint16/uint32
					}
					switch rng.IntN(6) {
					case 0:
						r.LoraName = "lora-a"
					case 1:
						r.CacheSalt = "tenant-b"
					case 2:
						r.LoraName, r.CacheSalt = "lora-a", "tenant-b"
					}
					if rng.IntN(3) == 0 {
						r.SessionID = "sess-1"
					}
					_, b.Events = cache.ServeRequest(r)
				}
				for _, ev := range b.Events {
					sawEvict = sawEvict || ev.Kind == EventRemoved
					sawSalt = sawSalt || ev.CacheSalt != ""
					sawLora = sawLora || ev.LoraName != ""
					sawSession = sawSession || ev.SessionID != ""
					sawContinuation = sawContinuation || ev.HasParent && ev.CacheSalt != ""
				}
				payload, err := x.Encode(b)
				if err != nil {
					t.Fatal(err)
				}
				c.check(payload, b)
			}
			if !sawEvict || !sawSalt || !sawLora || !sawSession || !sawContinuation {
				t.Fatalf("workload too narrow: evict %v salt %v lora %v session %v salted continuation %v",
					sawEvict, sawSalt, sawLora, sawSession, sawContinuation)
			}
		})
	}
}

// TestEncodeShapes pins what each encoding puts on the wire, read back with
// a generic msgpack decoder (independent of kvrouter's).
func TestEncodeShapes(t *testing.T) {
	big := uint64(0xfedcba9876543210) // ≥ 2^63, as vLLM's usually are
	stored := Event{Kind: EventStored, Hashes: []uint64{big, 5}, Tokens: seqTokens(0, 4), BlockSize: 2, Medium: "GPU"}
	withSession := stored
	withSession.SessionID, withSession.Parent, withSession.HasParent = "s1", 9, true
	removed := Event{Kind: EventRemoved, Hashes: []uint64{big}, Medium: "GPU"}
	cleared := Event{Kind: EventCleared}
	batch := Batch{TS: 1.5, Events: []Event{stored, withSession, removed, cleared}, DpRank: 1}

	decode := func(t *testing.T, enc Encoding, b Batch) ([]byte, []any) {
		x, err := NewEncoder(enc)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := x.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		var v []any
		if err := msgpack.Unmarshal(payload, &v); err != nil {
			t.Fatal(err)
		}
		if len(v) != 3 || v[0] != 1.5 || !bytes.HasPrefix(payload, []byte{0x93, 0xcb}) {
			t.Fatalf("batch %v (% x…): want [float64 1.5, events, rank]", v, payload[:2])
		}
		return payload, v[1].([]any)
	}

	t.Run("vllm-map", func(t *testing.T) {
		payload, evs := decode(t, EncodingVLLMMap, batch)
		want := [][]string{
			{"block_hashes", "block_size", "group_idx", "kv_cache_spec_kind", "lora_id", "lora_name", "medium", "parent_block_hash", "token_ids", "type"},
			{"block_hashes", "block_size", "group_idx", "kv_cache_spec_kind", "lora_id", "lora_name", "medium", "parent_block_hash", "session_id", "token_ids", "type"},
			{"block_hashes", "group_idx", "medium", "type"},
			{"type"},
		}
		for i, ev := range evs {
			m := ev.(map[string]any)
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !slices.Equal(keys, want[i]) {
				t.Errorf("event %d keys %v, want %v", i, keys, want[i])
			}
		}
		if !bytes.Contains(payload, binary.BigEndian.AppendUint64([]byte{0xcf}, big)) {
			t.Error("u64 hash not sent as msgpack uint64")
		}
		if !bytes.Contains(payload, []byte{0xaa, 'b', 'l', 'o', 'c', 'k', '_', 's', 'i', 'z', 'e', 0x02}) {
			t.Error("block_size not sent as a compact int")
		}
	})
	t.Run("vllm extra_keys", func(t *testing.T) {
		root := stored
		root.LoraName, root.CacheSalt = "L", "S"
		cont := withSession
		cont.CacheSalt = "S" // inherited from the parent: not repeated
		_, evs := decode(t, EncodingVLLMMap, Batch{TS: 1.5, Events: []Event{root, cont}})
		got := fmt.Sprint(evs[0].(map[string]any)["extra_keys"])
		if got != "[[L S] [L]]" {
			t.Errorf("root chain extra_keys = %s, want [[L S] [L]] (LoRA every block, salt block 0)", got)
		}
		if _, ok := evs[1].(map[string]any)["extra_keys"]; ok {
			t.Error("a continuation without LoRA carries extra_keys")
		}
		_, evs = decode(t, EncodingVLLMPositional, Batch{TS: 1.5, Events: []Event{root, cont}})
		if got := fmt.Sprint(evs[0].([]any)[8]); got != "[[L S] [L]]" {
			t.Errorf("positional extra_keys = %s", got)
		}
	})
	t.Run("vllm-positional", func(t *testing.T) {
		_, evs := decode(t, EncodingVLLMPositional, batch)
		lens := []int{11, 15, 4, 1}
		for i, ev := range evs {
			if a := ev.([]any); len(a) != lens[i] {
				t.Errorf("event %d has %d elements %v, want %d", i, len(a), a, lens[i])
			}
		}
		if s := evs[1].([]any)[14]; s != "s1" {
			t.Errorf("session_id at 14 = %v", s)
		}
	})
	t.Run("sglang", func(t *testing.T) {
		b := batch
		b.NilRank = true
		b.Events = slices.Clone(b.Events)
		b.Events[1].CacheSalt = "salt"
		payload, evs := decode(t, EncodingSGLang, b)
		lens := []int{7, 8, 3, 1}
		for i, ev := range evs {
			if a := ev.([]any); len(a) != lens[i] {
				t.Errorf("event %d has %d elements %v, want %d", i, len(a), a, lens[i])
			}
		}
		meta, ok := evs[1].([]any)[7].(map[string]any)
		if !ok || meta["session_id"] != "s1" || meta["cache_salt"] != "salt" || len(meta) != 2 {
			t.Errorf("metadata = %v", evs[1].([]any)[7])
		}
		if !bytes.Contains(payload, binary.BigEndian.AppendUint64([]byte{0xd3}, big)) ||
			bytes.Contains(payload, binary.BigEndian.AppendUint64([]byte{0xcf}, big)) {
			t.Error("hash ≥ 2^63 not sent as a signed int64")
		}
		if payload[len(payload)-1] != 0xc0 {
			t.Error("nil rank not sent as nil")
		}
	})
}

func TestEncoderRejectsBadInput(t *testing.T) {
	if _, err := NewEncoder("msgpack-ish"); err == nil {
		t.Error("NewEncoder accepted an unknown encoding")
	}
	if _, err := ParseEncoding(""); err != nil {
		t.Errorf("ParseEncoding(\"\") = %v, want the default", err)
	}
	x, _ := NewEncoder(EncodingVLLMMap)
	for _, ev := range []Event{{Kind: 0}, {Kind: EventStored, Hashes: []uint64{1}, Tokens: []uint32{1}, BlockSize: 2}} {
		if _, err := x.Encode(Batch{Events: []Event{ev}}); err == nil {
			t.Errorf("Encode accepted %+v", ev)
		}
	}
	if p, err := x.Encode(Batch{}); err != nil || !bytes.Equal(p, []byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90, 0x00}) {
		t.Errorf("heartbeat = % x, %v", p, err)
	}
}

func BenchmarkEncode(b *testing.B) {
	cache, _ := NewCache(Config{BlockSize: 16, CapacityBlocks: 1 << 16})
	_, evs := cache.Serve(seqTokens(0, 16*32))
	for _, enc := range Encodings() {
		b.Run(string(enc), func(b *testing.B) {
			x, _ := NewEncoder(enc)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := x.Encode(Batch{TS: 1, Events: evs}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
