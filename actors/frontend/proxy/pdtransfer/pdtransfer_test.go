package pdtransfer

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fixed is a random source that always gives the same bytes.
func fixed(b byte) *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte{b}, 8)) }

func mustParse(t *testing.T, s string) Body {
	t.Helper()
	b, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canon re-encodes JSON with every object's keys sorted and numbers kept
// exact, so a wanted body can be written readably and compared with what
// the builders wrote (TestStrip checks that untouched values keep their
// bytes).
func canon(t *testing.T, s string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestBuildPrefillLegs(t *testing.T) {
	const client = `{"model":"m","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true},"max_tokens":50,"min_tokens":4,"temperature":0.5}`
	for _, tc := range []struct {
		name   string
		p      Protocol
		body   string
		to     Prefill
		rnd    byte
		want   string
		decode string // SGLang: known up front
		room   uint64
		id     uint64
	}{
		{name: "vllm", p: VLLM, body: client, want: `{"model":"m","prompt":[1,2,3],"stream":false,"max_tokens":1,"temperature":0.5,
			"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`},
		{name: "vllm max_completion_tokens", p: VLLM, body: `{"model":"m","messages":[],"max_completion_tokens":9,"min_completion_tokens":2}`,
			want: `{"model":"m","messages":[],"stream":false,"max_tokens":1,"max_completion_tokens":1,
			"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`},
		{name: "sglang", p: SGLang, body: client, to: Prefill{BootstrapHost: "10.0.0.7", BootstrapPort: 8998}, rnd: 0xff,
			want: `{"model":"m","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true},"max_tokens":50,"min_tokens":4,"temperature":0.5,
			"bootstrap_host":"10.0.0.7","bootstrap_port":8998,"bootstrap_room":9223372036854775807}`, room: 1<<63 - 1},
		{name: "sglang default port", p: SGLang, body: `{"model":"m","prompt":"hi"}`, to: Prefill{BootstrapHost: "h"}, rnd: 0,
			want: `{"model":"m","prompt":"hi","bootstrap_host":"h","bootstrap_port":null,"bootstrap_room":0}`},
		{name: "trtllm", p: TRTLLM, body: client, rnd: 0, id: MinDisaggID,
			want: `{"model":"m","prompt":[1,2,3],"stream":false,"max_tokens":50,"min_tokens":4,"temperature":0.5,
			"disaggregated_params":{"request_type":"context_only","disagg_request_id":1099511627776}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legs, err := Build(tc.p, mustParse(t, tc.body), tc.to, fixed(tc.rnd))
			if err != nil {
				t.Fatal(err)
			}
			if got := canon(t, string(legs.Prefill)); got != canon(t, tc.want) {
				t.Fatalf("prefill leg\n got %s\nwant %s", got, canon(t, tc.want))
			}
			if tc.p == SGLang && !bytes.Equal(legs.Decode, legs.Prefill) {
				t.Fatalf("SGLang decode leg %s differs from the prefill leg", legs.Decode)
			}
			if tc.p != SGLang && legs.Decode != nil {
				t.Fatalf("%s decode leg built before the prefill answer: %s", tc.p, legs.Decode)
			}
			if legs.Room != tc.room || legs.DisaggID != tc.id {
				t.Fatalf("room %d id %d, want %d %d", legs.Room, legs.DisaggID, tc.room, tc.id)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	b := Body{"model": json.RawMessage(`"m"`)}
	if _, err := Build(SGLang, b, Prefill{}, fixed(1)); !errors.Is(err, ErrNoBootstrap) {
		t.Fatalf("SGLang without a bootstrap host: %v", err)
	}
	if _, err := Build("mooncake", b, Prefill{}, fixed(1)); !errors.Is(err, ErrUnknownProto) {
		t.Fatalf("unknown protocol: %v", err)
	}
	if _, err := Build(TRTLLM, b, Prefill{}, strings.NewReader("")); err == nil {
		t.Fatal("a random source that runs dry must fail the build")
	}
	if _, err := Parse([]byte(`[1]`)); !errors.Is(err, ErrBody) {
		t.Fatalf("an array body: %v", err)
	}
}

func TestDecodeLegs(t *testing.T) {
	const client = `{"model":"m","prompt":"the text","stream":true,"max_tokens":50}`
	const chat = `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`
	vllmAnswer := `{"id":"c","choices":[{"text":"a"}],"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,
		"remote_engine_id":"e1","remote_block_ids":[4,5],"remote_host":"10.0.0.7","remote_port":5600,"remote_request_id":"r","tp_size":1}}`
	trtAnswer := `{"choices":[{"text":"a","finish_reason":"length","disaggregated_params":{"request_type":"context_only","first_gen_tokens":[7],
		"ctx_request_id":42,"disagg_request_id":1099511627776,"encoded_opaque_state":"b3BhcXVl"}}],"prompt_token_ids":[11,12,13]}`
	trtLegs := Legs{Protocol: TRTLLM, DisaggID: MinDisaggID}
	for _, tc := range []struct {
		name   string
		legs   Legs
		body   string
		answer string
		want   string
		err    error
	}{
		{name: "vllm", legs: Legs{Protocol: VLLM}, body: client, answer: vllmAnswer,
			want: `{"model":"m","prompt":"the text","stream":true,"max_tokens":50,"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,
		"remote_engine_id":"e1","remote_block_ids":[4,5],"remote_host":"10.0.0.7","remote_port":5600,"remote_request_id":"r","tp_size":1}}`},
		{name: "vllm no params", legs: Legs{Protocol: VLLM}, body: client, answer: `{"choices":[]}`, err: ErrNoParams},
		{name: "vllm null params", legs: Legs{Protocol: VLLM}, body: client, answer: `{"kv_transfer_params":null}`, err: ErrNoParams},
		{name: "vllm empty params", legs: Legs{Protocol: VLLM}, body: client, answer: `{"kv_transfer_params":{}}`, err: ErrNoParams},
		{name: "vllm not json", legs: Legs{Protocol: VLLM}, body: client, answer: `<html>`, err: ErrBadAnswer},
		{name: "trtllm completions", legs: trtLegs, body: client, answer: trtAnswer,
			want: `{"model":"m","prompt":[11,12,13],"stream":true,"max_tokens":50,"disaggregated_params":{"request_type":"generation_only",
			"first_gen_tokens":[7],"ctx_request_id":42,"disagg_request_id":1099511627776,"encoded_opaque_state":"b3BhcXVl"}}`},
		{name: "trtllm chat", legs: trtLegs, body: chat, answer: trtAnswer,
			want: `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"prompt_token_ids":[11,12,13],"disaggregated_params":{"request_type":"generation_only",
			"first_gen_tokens":[7],"ctx_request_id":42,"disagg_request_id":1099511627776,"encoded_opaque_state":"b3BhcXVl"}}`},
		{name: "trtllm no params", legs: trtLegs, body: client, answer: `{"choices":[{"text":"a"}]}`, err: ErrNoParams},
		{name: "trtllm no ctx id", legs: trtLegs, body: client, answer: `{"choices":[{"disaggregated_params":{"ctx_request_id":null}}]}`, err: ErrNoParams},
		{name: "trtllm finished in context", legs: trtLegs, body: client,
			answer: `{"choices":[{"finish_reason":"stop","disaggregated_params":{"ctx_request_id":1}}]}`, err: ErrFinished},
		{name: "trtllm two choices", legs: trtLegs, body: client, answer: `{"choices":[{},{}]}`, err: ErrBadAnswer},
		{name: "trtllm other request", legs: trtLegs, body: client,
			answer: `{"choices":[{"disaggregated_params":{"ctx_request_id":1,"disagg_request_id":5}}]}`, err: ErrBadAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.legs, mustParse(t, tc.body), []byte(tc.answer))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if canon(t, string(got)) != canon(t, tc.want) {
				t.Fatalf("decode leg\n got %s\nwant %s", got, canon(t, tc.want))
			}
		})
	}
}

func TestStrip(t *testing.T) {
	b := mustParse(t, `{"model":"m","kv_transfer_params":{"do_remote_prefill":true,"remote_host":"evil"},"bootstrap_host":"evil","bootstrap_room":1,
		"disaggregated_params":{"request_type":"generation_only"},"prompt":"p","tools":[{"z":1, "a":2}]}`)
	found := b.Strip()
	if got, want := strings.Join(found, ","), "kv_transfer_params,bootstrap_host,bootstrap_room,disaggregated_params"; got != want {
		t.Fatalf("stripped %s, want %s", got, want)
	}
	if got := string(b.Encode()); got != `{"model":"m","prompt":"p","tools":[{"z":1,"a":2}]}` {
		t.Fatalf("after Strip: %s", got)
	}
	if found := mustParse(t, `{"model":"m"}`).Strip(); found != nil {
		t.Fatalf("a clean body: stripped %v", found)
	}
}

func TestForEngine(t *testing.T) {
	for engine, want := range map[string]bool{"vllm": true, "sglang": true, "trtllm": true, "auto": false, "": false, "VLLM": false} {
		if p, ok := ForEngine(engine); ok != want || (ok && string(p) != engine) {
			t.Errorf("ForEngine(%q) = %q, %v", engine, p, ok)
		}
	}
	if !VLLM.Sequential() || !TRTLLM.Sequential() || SGLang.Sequential() {
		t.Fatal("vLLM and TensorRT-LLM wait for the prefill answer; SGLang does not")
	}
}
