package simengine

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// pair is a prefill and a decode engine of one protocol sharing a
// Transfer.
type pair struct {
	t                *testing.T
	tr               *Transfer
	pre, dec         *Engine
	preURL, decURL   string
	preOpts, decOpts *DisaggOptions
}

func newPair(t *testing.T, proto string) *pair {
	t.Helper()
	p := &pair{t: t, tr: NewTransfer()}
	p.preOpts = &DisaggOptions{Role: RolePrefill, Protocol: proto, Transfer: p.tr, BootstrapHost: "10.0.0.7", BootstrapPort: 8998, EngineID: "e-pre"}
	p.decOpts = &DisaggOptions{Role: RoleDecode, Protocol: proto, Transfer: p.tr}
	p.pre, p.preURL = serveSim(t, p.preOpts)
	p.dec, p.decURL = serveSim(t, p.decOpts)
	return p
}

func serveSim(t *testing.T, d *DisaggOptions) (*Engine, string) {
	t.Helper()
	eng, err := New(Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	srv, err := eng.ServeHTTP("127.0.0.1:0", HTTPOptions{CompletionTokens: 3, Disagg: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return eng, "http://" + srv.ServingEndpoint()
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

const prompt = `[1,2,3,4,5,6,7,8,9]`

// vLLM: the prefill engine answers kv_transfer_params naming itself and
// the prompt's blocks; the decode engine given them takes the prompt over
// and stores (and publishes) its blocks. A prefill leg with another
// max_tokens, and a decode leg naming a transfer that never happened,
// are refused.
func TestDisaggVLLMPair(t *testing.T) {
	p := newPair(t, "vllm")
	code, ans := postJSON(t, p.preURL, `{"model":"m","prompt":`+prompt+`,"stream":false,"max_tokens":1,
		"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`)
	kv, _ := ans["kv_transfer_params"].(map[string]any)
	if code != 200 || kv["remote_engine_id"] != "e-pre" || kv["do_remote_prefill"] != true || len(kv["remote_block_ids"].([]any)) != 2 {
		t.Fatalf("prefill answer %d %v", code, ans)
	}
	if p.pre.Stats().Blocks != 2 || p.tr.Pending() != 1 {
		t.Fatalf("prefill engine holds %d blocks, %d prompts pending", p.pre.Stats().Blocks, p.tr.Pending())
	}
	kvJSON, _ := json.Marshal(kv)
	if code, ans := postJSON(t, p.decURL, `{"model":"m","prompt":`+prompt+`,"kv_transfer_params":`+string(kvJSON)+`}`); code != 200 {
		t.Fatalf("decode answer %d %v", code, ans)
	}
	if st := p.dec.Stats(); st.Blocks != 2 || st.SentBlocks != 2 || p.tr.Pending() != 0 || p.tr.Stats() != (TransferStats{Prefills: 1, Decodes: 1}) {
		t.Fatalf("decode engine %+v, transfer %+v", st, p.tr.Stats())
	}
	if len(p.tr.Violations()) != 0 {
		t.Fatalf("violations %v", p.tr.Violations())
	}
	if code, _ := postJSON(t, p.preURL, `{"model":"m","prompt":`+prompt+`,"stream":false,"max_tokens":2,
		"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`); code != 400 {
		t.Fatalf("a prefill leg of 2 tokens: %d", code)
	}
	if code, _ := postJSON(t, p.decURL, `{"model":"m","prompt":`+prompt+`,"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_request_id":"nope"}}`); code != 400 {
		t.Fatalf("a decode leg of an unknown transfer: %d", code)
	}
	if code, _ := postJSON(t, p.decURL, `{"model":"m","prompt":`+prompt+`}`); code != 200 || p.tr.Stats().LocalDecodes != 1 {
		t.Fatalf("a local request on the decode engine: %d %+v", code, p.tr.Stats())
	}
	if v := p.tr.Violations(); len(v) != 2 {
		t.Fatalf("violations %q, want the two refused legs", v)
	}
}

// SGLang: the decode leg waits for its room while the prefill leg runs;
// a room that differs, or a bootstrap address that is not the prefill
// engine's, is refused.
func TestDisaggSGLangPair(t *testing.T) {
	p := newPair(t, "sglang")
	leg := `{"model":"m","prompt":` + prompt + `,"bootstrap_host":"10.0.0.7","bootstrap_port":8998,"bootstrap_room":9223372036854775807}`
	done := make(chan int, 1)
	go func() { // no t.Fatal off the test's goroutine
		resp, err := http.Post(p.decURL+"/v1/completions", "application/json", strings.NewReader(leg))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if code, ans := postJSON(t, p.preURL, leg); code != 200 {
		t.Fatalf("prefill leg %d %v", code, ans)
	}
	if code := <-done; code != 200 || p.dec.Stats().Blocks != 2 {
		t.Fatalf("decode leg %d, decode engine holds %d blocks", code, p.dec.Stats().Blocks)
	}
	if code, _ := postJSON(t, p.preURL, `{"model":"m","prompt":[1],"bootstrap_host":"evil","bootstrap_port":8998,"bootstrap_room":1}`); code != 400 {
		t.Fatalf("another bootstrap host: %d", code)
	}
	if code, _ := postJSON(t, p.decURL, `{"model":"m","prompt":[1]}`); code != 400 {
		t.Fatalf("an SGLang decode engine without bootstrap fields: %d", code)
	}
	if v := p.tr.Violations(); len(v) != 2 {
		t.Fatalf("violations %q", v)
	}
}

// TensorRT-LLM: context_only answers disaggregated_params and the
// prompt's ids; generation_only with them is served from the transfer.
func TestDisaggTRTLLMPair(t *testing.T) {
	p := newPair(t, "trtllm")
	code, ans := postJSON(t, p.preURL, `{"model":"m","prompt":`+prompt+`,"stream":false,
		"disaggregated_params":{"request_type":"context_only","disagg_request_id":1099511627777}}`)
	choices, _ := ans["choices"].([]any)
	if code != 200 || len(choices) != 1 {
		t.Fatalf("context answer %d %v", code, ans)
	}
	params := choices[0].(map[string]any)["disaggregated_params"].(map[string]any)
	if params["disagg_request_id"] != 1099511627777.0 || params["ctx_request_id"] == nil || len(ans["prompt_token_ids"].([]any)) != 9 {
		t.Fatalf("context answer %v", ans)
	}
	params["request_type"] = "generation_only"
	pj, _ := json.Marshal(params)
	if code, ans := postJSON(t, p.decURL, `{"model":"m","prompt":`+prompt+`,"disaggregated_params":`+string(pj)+`}`); code != 200 {
		t.Fatalf("generation answer %d %v", code, ans)
	}
	if p.dec.Stats().Blocks != 2 || len(p.tr.Violations()) != 0 {
		t.Fatalf("decode engine %+v, violations %v", p.dec.Stats(), p.tr.Violations())
	}
	if code, _ := postJSON(t, p.preURL, `{"model":"m","prompt":[1],"stream":false,"disaggregated_params":{"request_type":"context_only","disagg_request_id":5}}`); code != 400 {
		t.Fatalf("a local-range disagg_request_id: %d", code)
	}
}
