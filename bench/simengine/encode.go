package simengine

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Encoding is a wire encoding of events (messages/wire/README.md, "Events").
type Encoding string

// The encodings the simulator speaks.
const (
	// EncodingVLLMMap is vLLM ≥ 0.26: map events, u64 hashes, defaults
	// omitted except group_idx 0 and the spec kind.
	EncodingVLLMMap Encoding = "vllm-map"
	// EncodingVLLMPositional is vLLM ≤ 0.25: array events in declaration
	// order, trailing defaults omitted.
	EncodingVLLMPositional Encoding = "vllm-positional"
	// EncodingSGLang is SGLang: array events, signed int64 hashes, a
	// metadata map at position 7.
	EncodingSGLang Encoding = "sglang"
)

// Encodings lists the supported encodings, the default first.
func Encodings() []Encoding {
	return []Encoding{EncodingVLLMMap, EncodingVLLMPositional, EncodingSGLang}
}

// ParseEncoding checks an encoding name; "" means EncodingVLLMMap.
func ParseEncoding(s string) (Encoding, error) {
	if s == "" {
		return EncodingVLLMMap, nil
	}
	for _, e := range Encodings() {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("simengine: unknown encoding %q (known: %v)", s, Encodings())
}

// Engine returns the kvrouter engine adapter name that decodes e.
func (e Encoding) Engine() string {
	if e == EncodingSGLang {
		return "sglang"
	}
	return "vllm"
}

// Batch is one engine batch before encoding: [ts, events, rank].
type Batch struct {
	TS     float64
	Events []Event
	DpRank uint32
	// NilRank sends nil as the rank (SGLang without attention DP).
	NilRank bool
}

// Encoder turns batches into payloads. It reuses its buffer between calls
// and is not safe for concurrent use.
type Encoder struct {
	enc Encoding
	buf bytes.Buffer
	w   *msgpack.Encoder
	err error // first write error of the current batch
}

// NewEncoder returns an encoder for e.
func NewEncoder(e Encoding) (*Encoder, error) {
	e, err := ParseEncoding(string(e))
	if err != nil {
		return nil, err
	}
	x := &Encoder{enc: e}
	x.w = msgpack.NewEncoder(&x.buf)
	x.w.UseCompactInts(true) // like msgspec: every int in its smallest form
	return x, nil
}

// Encoding returns the encoder's encoding.
func (x *Encoder) Encoding() Encoding { return x.enc }

// Encode returns the msgpack payload of b in a new slice.
func (x *Encoder) Encode(b Batch) ([]byte, error) {
	x.buf.Reset()
	x.err = nil
	x.arr(3)
	x.check(x.w.EncodeFloat64(b.TS))
	x.arr(len(b.Events))
	for i := range b.Events {
		if err := x.event(&b.Events[i]); err != nil {
			return nil, fmt.Errorf("simengine: encode event %d as %s: %w", i, x.enc, err)
		}
	}
	if b.NilRank {
		x.check(x.w.EncodeNil())
	} else {
		x.uint(uint64(b.DpRank))
	}
	if x.err != nil {
		return nil, fmt.Errorf("simengine: encode batch as %s: %w", x.enc, x.err)
	}
	return bytes.Clone(x.buf.Bytes()), nil
}

func (x *Encoder) event(ev *Event) error {
	switch ev.Kind {
	case EventStored, EventRemoved, EventCleared:
	default:
		return fmt.Errorf("unknown event kind %d", ev.Kind)
	}
	if ev.Kind == EventStored && len(ev.Tokens) != len(ev.Hashes)*ev.BlockSize {
		return fmt.Errorf("stored event has %d tokens for %d blocks of %d", len(ev.Tokens), len(ev.Hashes), ev.BlockSize)
	}
	switch x.enc {
	case EncodingVLLMMap:
		x.vllmMap(ev)
	case EncodingVLLMPositional:
		x.vllmPositional(ev)
	default:
		x.sglang(ev)
	}
	return x.err
}

// vllmMap writes vLLM ≥ 0.26's map form. Required fields (lora_id, medium,
// lora_name, parent_block_hash) are present even when nil, as msgspec writes
// fields without defaults; session_id and extra_keys only when set. The
// cache salt travels as vLLM sends it: a bare string in block 0's
// extra_keys, so a continuation inherits it from its parent.
func (x *Encoder) vllmMap(ev *Event) {
	switch ev.Kind {
	case EventCleared:
		x.mapLen(1)
		x.str("type").str(ev.Kind.String())
	case EventRemoved:
		x.mapLen(4)
		x.str("type").str(ev.Kind.String())
		x.str("block_hashes").hashes(ev.Hashes, false)
		x.str("medium").optStr(ev.Medium)
		x.str("group_idx").uint(0)
	case EventStored:
		n := 10
		extra := hasExtraKeys(ev)
		if extra {
			n++
		}
		if ev.SessionID != "" {
			n++
		}
		x.mapLen(n)
		x.str("type").str(ev.Kind.String())
		x.str("block_hashes").hashes(ev.Hashes, false)
		x.str("parent_block_hash").parent(ev, false)
		x.str("token_ids").tokens(ev.Tokens)
		x.str("block_size").uint(uint64(ev.BlockSize))
		x.str("lora_id").null()
		x.str("medium").optStr(ev.Medium)
		x.str("lora_name").optStr(ev.LoraName)
		if extra {
			x.str("extra_keys").extraKeys(ev)
		}
		x.str("group_idx").uint(0)
		x.str("kv_cache_spec_kind").str(mainKind)
		if ev.SessionID != "" {
			x.str("session_id").str(ev.SessionID)
		}
	}
}

// vllmPositional writes vLLM's array form: positions 0–7 always, then
// extra_keys, group_idx 0 and the kind (non-default, so present), then nil
// padding up to session_id at 14 when it is set.
func (x *Encoder) vllmPositional(ev *Event) {
	switch ev.Kind {
	case EventCleared:
		x.arr(1).str(ev.Kind.String())
	case EventRemoved:
		x.arr(4).str(ev.Kind.String()).hashes(ev.Hashes, false).optStr(ev.Medium).uint(0)
	case EventStored:
		n := 11
		if ev.SessionID != "" {
			n = 15
		}
		x.arr(n).str(ev.Kind.String()).hashes(ev.Hashes, false).parent(ev, false).
			tokens(ev.Tokens).uint(uint64(ev.BlockSize)).null().optStr(ev.Medium).optStr(ev.LoraName)
		if hasExtraKeys(ev) {
			x.extraKeys(ev)
		} else {
			x.null()
		}
		x.uint(0).str(mainKind)
		if ev.SessionID != "" {
			x.null().null().null().str(ev.SessionID)
		}
	}
}

// sglang writes SGLang's array form: signed hashes, lora_id nil, and a
// metadata map at position 7 only when it has something to say.
func (x *Encoder) sglang(ev *Event) {
	switch ev.Kind {
	case EventCleared:
		x.arr(1).str(ev.Kind.String())
	case EventRemoved:
		x.arr(3).str(ev.Kind.String()).hashes(ev.Hashes, true).optStr(ev.Medium)
	case EventStored:
		meta := 0
		for _, s := range []string{ev.SessionID, ev.CacheSalt, ev.LoraName} {
			if s != "" {
				meta++
			}
		}
		n := 7
		if meta > 0 {
			n = 8
		}
		x.arr(n).str(ev.Kind.String()).hashes(ev.Hashes, true).parent(ev, true).
			tokens(ev.Tokens).uint(uint64(ev.BlockSize)).null().optStr(ev.Medium)
		if meta > 0 {
			x.mapLen(meta)
			if ev.SessionID != "" {
				x.str("session_id").str(ev.SessionID)
			}
			if ev.CacheSalt != "" {
				x.str("cache_salt").str(ev.CacheSalt)
			}
			if ev.LoraName != "" {
				x.str("lora_name").str(ev.LoraName)
			}
		}
	}
}

// mainKind is the kv_cache_spec_kind of the simulated (only) group.
const mainKind = "full_attention"

// hasExtraKeys reports whether a stored event carries extra_keys: vLLM's
// per-block hash inputs, here the LoRA name (every block) and the cache salt
// (the request's first block only, so only on a chain that starts at the
// root).
func hasExtraKeys(ev *Event) bool {
	return ev.LoraName != "" || ev.CacheSalt != "" && !ev.HasParent
}

// extraKeys writes one entry per block as vLLM builds it: [lora_name?,
// cache_salt?] with the salt in block 0 of a root chain, nil when empty.
func (x *Encoder) extraKeys(ev *Event) *Encoder {
	x.arr(len(ev.Hashes))
	for i := range ev.Hashes {
		n := 0
		if ev.LoraName != "" {
			n++
		}
		salt := i == 0 && ev.CacheSalt != "" && !ev.HasParent
		if salt {
			n++
		}
		if n == 0 {
			x.null()
			continue
		}
		x.arr(n)
		if ev.LoraName != "" {
			x.str(ev.LoraName)
		}
		if salt {
			x.str(ev.CacheSalt)
		}
	}
	return x
}

func (x *Encoder) hashes(hs []uint64, signed bool) *Encoder {
	x.arr(len(hs))
	for _, h := range hs {
		x.hash(h, signed)
	}
	return x
}

func (x *Encoder) hash(h uint64, signed bool) *Encoder {
	if signed {
		x.check(x.w.EncodeInt(int64(h)))
	} else {
		x.uint(h)
	}
	return x
}

func (x *Encoder) parent(ev *Event, signed bool) *Encoder {
	if !ev.HasParent {
		return x.null()
	}
	return x.hash(ev.Parent, signed)
}

func (x *Encoder) tokens(ts []uint32) *Encoder {
	x.arr(len(ts))
	for _, t := range ts {
		x.uint(uint64(t))
	}
	return x
}

func (x *Encoder) check(err error) {
	if err != nil && x.err == nil {
		x.err = err
	}
}

func (x *Encoder) arr(n int) *Encoder    { x.check(x.w.EncodeArrayLen(n)); return x }
func (x *Encoder) mapLen(n int) *Encoder { x.check(x.w.EncodeMapLen(n)); return x }
func (x *Encoder) str(s string) *Encoder { x.check(x.w.EncodeString(s)); return x }
func (x *Encoder) uint(v uint64) *Encoder {
	x.check(x.w.EncodeUint(v))
	return x
}
func (x *Encoder) null() *Encoder { x.check(x.w.EncodeNil()); return x }

// optStr writes s, or nil when it is empty.
func (x *Encoder) optStr(s string) *Encoder {
	if s == "" {
		return x.null()
	}
	return x.str(s)
}
