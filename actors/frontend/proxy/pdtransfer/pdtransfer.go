package pdtransfer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Protocol is one engine's prefill/decode transfer protocol.
type Protocol string

// The protocols kvrouter runs (see doc.go for each one's fields).
const (
	// VLLM: a KV connector (NIXL and the like) — prefill first, its
	// kv_transfer_params handed to the decode leg.
	VLLM Protocol = "vllm"
	// SGLang: the bootstrap address and a shared room on both legs, sent
	// at once.
	SGLang Protocol = "sglang"
	// TRTLLM: context_only first, generation_only with the returned
	// disaggregated_params.
	TRTLLM Protocol = "trtllm"
)

// Protocols lists the protocols, in a stable order (flag help, metrics).
var Protocols = []Protocol{VLLM, SGLang, TRTLLM}

// ForEngine is the protocol of a registration's engine choice (messages/
// engine names: vllm, sglang, trtllm); false for any other ("auto", "").
func ForEngine(engine string) (Protocol, bool) {
	p := Protocol(engine)
	return p, slices.Contains(Protocols, p)
}

// Sequential reports whether the decode leg needs the prefill leg's answer
// (vLLM, TensorRT-LLM) rather than going out with it (SGLang).
func (p Protocol) Sequential() bool { return p != SGLang }

// ClientFields are the body fields through which a request could tell an
// engine where to pull KV from, or make it a prefill or a decode leg. Only
// the proxy writes them: Strip removes them from a client's body.
var ClientFields = []string{"kv_transfer_params", "bootstrap_host", "bootstrap_port", "bootstrap_room", "disaggregated_params"}

// Errors of the builders; every one means the leg cannot go out as a
// split request (the caller falls back or fails it).
var (
	ErrBody         = errors.New("the request body is not a JSON object")
	ErrNoParams     = errors.New("the prefill answer has no transfer params")
	ErrBadAnswer    = errors.New("the prefill answer is not what the protocol returns")
	ErrNoBootstrap  = errors.New("the prefill worker has no bootstrap address")
	ErrUnknownProto = errors.New("unknown transfer protocol")
	// ErrFinished: the prefill engine finished the request itself
	// (TensorRT-LLM's context server stopped at its first token): there is
	// nothing left for a decode leg to generate from its params.
	ErrFinished = errors.New("the prefill engine finished the request")
)

// Body is an OpenAI request body as its top-level fields, each kept as
// the client wrote it: the fields the protocols do not touch go to the
// engines unchanged (whitespace compacted, key order inside kept).
type Body map[string]json.RawMessage

// Parse reads a body (a JSON object).
func Parse(raw []byte) (Body, error) {
	var b Body
	if err := json.Unmarshal(raw, &b); err != nil || b == nil {
		return nil, ErrBody
	}
	return b, nil
}

// Strip removes the ClientFields from b and returns the ones it found
// (nil when none), in ClientFields order.
func (b Body) Strip() []string {
	var found []string
	for _, f := range ClientFields {
		if _, ok := b[f]; ok {
			delete(b, f)
			found = append(found, f)
		}
	}
	return found
}

// Encode is the body as JSON (keys sorted: deterministic).
func (b Body) Encode() []byte {
	out, _ := json.Marshal(map[string]json.RawMessage(b)) // RawMessages are valid JSON: no error
	return out
}

func (b Body) clone() Body {
	c := make(Body, len(b)+4)
	for k, v := range b {
		c[k] = v
	}
	return c
}

func (b Body) set(k string, v any) {
	raw, _ := json.Marshal(v) // plain values: no error
	b[k] = raw
}

// Prefill is where the prefill leg goes, as the router chose it (its
// registration): SGLang's bootstrap address; the others need none.
type Prefill struct {
	BootstrapHost string
	BootstrapPort uint16
}

// Legs are one split request's bodies: the prefill leg's, and — for SGLang
// — the decode leg's, known before either is sent. Room is SGLang's
// bootstrap_room, DisaggID TensorRT-LLM's disagg_request_id (0 when the
// protocol has none).
type Legs struct {
	Protocol Protocol
	Prefill  []byte
	Decode   []byte
	Room     uint64
	DisaggID uint64
}

// Build makes the prefill leg of the client's body b (Strip already
// applied) under protocol p; rnd gives the random room or request id
// (crypto/rand.Reader in production). For SGLang the decode leg is built
// too (the same body, the same room).
func Build(p Protocol, b Body, to Prefill, rnd io.Reader) (Legs, error) {
	legs := Legs{Protocol: p}
	pre := b.clone()
	switch p {
	case VLLM:
		pre.set("kv_transfer_params", map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
			"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil})
		pre.set("stream", false)
		pre.set("max_tokens", 1)
		if _, ok := b["max_completion_tokens"]; ok {
			pre.set("max_completion_tokens", 1)
		}
		delete(pre, "stream_options")
		delete(pre, "min_tokens") // a prefill leg stops at one token
		delete(pre, "min_completion_tokens")
	case SGLang:
		if to.BootstrapHost == "" {
			return Legs{}, ErrNoBootstrap
		}
		room, err := random63(rnd, 0)
		if err != nil {
			return Legs{}, err
		}
		legs.Room = room
		pre.set("bootstrap_host", to.BootstrapHost)
		if to.BootstrapPort != 0 {
			pre.set("bootstrap_port", to.BootstrapPort)
		} else {
			pre.set("bootstrap_port", nil) // the engine's default port, as SGLang's router sends it
		}
		pre.set("bootstrap_room", room)
		legs.Decode = pre.Encode()
	case TRTLLM:
		id, err := random63(rnd, MinDisaggID)
		if err != nil {
			return Legs{}, err
		}
		legs.DisaggID = id
		pre.set("disaggregated_params", map[string]any{"request_type": "context_only", "disagg_request_id": id})
		pre.set("stream", false)
		delete(pre, "stream_options")
	default:
		return Legs{}, fmt.Errorf("%w %q", ErrUnknownProto, p)
	}
	legs.Prefill = pre.Encode()
	return legs, nil
}

// MinDisaggID is the lowest TensorRT-LLM disagg_request_id kvrouter draws:
// the engine keeps ids below 2^40 for its local requests.
const MinDisaggID = 1 << 40

// random63 is a uniform random integer in [lo, 2^63) read from rnd.
func random63(rnd io.Reader, lo uint64) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return 0, fmt.Errorf("random id: %w", err)
	}
	v := binary.BigEndian.Uint64(b[:]) >> 1 // 63 bits
	if v < lo {
		v += lo // lo ≤ 2^40: stays below 2^63, near-uniform
	}
	return v, nil
}

// MaxAnswerBytes caps the prefill answer the proxy reads (a whole,
// non-streamed answer of one token and its transfer params).
const MaxAnswerBytes = 1 << 20

// Decode makes the decode leg of a sequential protocol from the client's
// body b and the prefill leg's answer (its whole JSON body): vLLM's
// kv_transfer_params as returned; TensorRT-LLM's first choice's
// disaggregated_params turned generation_only, and the prompt as the ids
// the context server returns. For SGLang it returns legs.Decode.
func Decode(legs Legs, b Body, answer []byte) ([]byte, error) {
	switch legs.Protocol {
	case SGLang:
		return legs.Decode, nil
	case VLLM:
		var a struct {
			KV json.RawMessage `json:"kv_transfer_params"`
		}
		if err := json.Unmarshal(answer, &a); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadAnswer, err)
		}
		if !isObject(a.KV) {
			return nil, ErrNoParams
		}
		dec := b.clone()
		dec["kv_transfer_params"] = a.KV
		return dec.Encode(), nil
	case TRTLLM:
		return trtDecode(legs, b, answer)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownProto, legs.Protocol)
}

func trtDecode(legs Legs, b Body, answer []byte) ([]byte, error) {
	var a struct {
		Choices []struct {
			Params       map[string]json.RawMessage `json:"disaggregated_params"`
			FinishReason *string                    `json:"finish_reason"`
		} `json:"choices"`
		PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
	}
	if err := json.Unmarshal(answer, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadAnswer, err)
	}
	if len(a.Choices) != 1 {
		return nil, fmt.Errorf("%w: %d choices, want 1", ErrBadAnswer, len(a.Choices))
	}
	if fr := a.Choices[0].FinishReason; fr != nil && *fr != "length" && *fr != "not_finished" {
		return nil, fmt.Errorf("%w (finish_reason %q)", ErrFinished, *fr)
	}
	params := a.Choices[0].Params
	if params == nil || isNull(params["ctx_request_id"]) {
		return nil, ErrNoParams
	}
	if id, err := strconv.ParseUint(string(params["disagg_request_id"]), 10, 64); err == nil && id != legs.DisaggID {
		return nil, fmt.Errorf("%w: disagg_request_id %d, sent %d", ErrBadAnswer, id, legs.DisaggID)
	}
	gen := make(map[string]json.RawMessage, len(params))
	for k, v := range params {
		gen[k] = v
	}
	gen["request_type"] = json.RawMessage(`"generation_only"`)
	dec := b.clone()
	dec.set("disaggregated_params", gen)
	if !isNull(a.PromptTokenIDs) {
		if _, chat := b["messages"]; chat {
			dec["prompt_token_ids"] = a.PromptTokenIDs
		} else {
			dec["prompt"] = a.PromptTokenIDs
		}
	}
	return dec.Encode(), nil
}

// isObject: a non-empty JSON object (vLLM answers null or {} when the
// connector hands nothing over).
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) > 0
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}
