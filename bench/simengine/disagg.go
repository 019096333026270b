package simengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
)

// Disaggregated serving: an engine's OpenAI surface can play the prefill
// or the decode half of a pair (HTTPOptions.Disagg), speaking one
// engine's transfer protocol as kvrouter's proxy runs it (actors/frontend/
// proxy/pdtransfer). A prefill engine checks its request carries exactly
// the protocol's prefill fields, computes the prompt's blocks (stored and
// published as any request's), hands the prompt to the pair's Transfer and
// answers with what the real engine returns (vLLM: kv_transfer_params;
// TensorRT-LLM: disaggregated_params and prompt_token_ids). A decode
// engine checks it got exactly those params (SGLang: the same room, waited
// for while the prefill leg runs), takes the transferred prompt — it must
// be the decode request's own — and serves it: the blocks are stored in
// its cache and published as KV events, as a decode engine publishes the
// blocks it received. A decode request without transfer fields is a local
// prefill (vLLM and TensorRT-LLM decode engines take those; an SGLang
// decode engine refuses it). Every refusal is a 400 and a Violation.
//
// What it leaves out: no KV bytes move (the prompt's token ids stand for
// them), no bootstrap server listens, no timing of the transfer.

// Roles of DisaggOptions.Role.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// DisaggOptions make an engine's surface one half of a disaggregated pair.
type DisaggOptions struct {
	// Role is RolePrefill or RoleDecode.
	Role string
	// Protocol is "vllm", "sglang" or "trtllm".
	Protocol string
	// Transfer is the medium the pair shares (NewTransfer).
	Transfer *Transfer
	// BootstrapHost and BootstrapPort (SGLang prefill) are the bootstrap
	// address its requests must name (as registered).
	BootstrapHost string
	BootstrapPort uint16
	// EngineID is the vLLM remote_engine_id a prefill engine reports
	// (default "sim-prefill").
	EngineID string
}

// Transfer is the KV transfer medium of a simulated prefill/decode fleet:
// prompts handed over by prefill engines under the protocol's key (vLLM's
// remote_request_id, SGLang's room, TensorRT-LLM's ctx_request_id), taken
// by decode engines. It records what each side did, and every violation.
// Bounded: at most MaxPending prompts wait.
type Transfer struct {
	mu         sync.Mutex
	pending    map[string]handover
	arrived    chan struct{} // closed (and replaced) when a prompt is handed over
	next       uint64
	stats      TransferStats
	violations []string
}

type handover struct {
	tokens []uint32
	from   string // vLLM engine id, SGLang bootstrap address
	blocks int
}

// MaxPending bounds the prompts a Transfer holds.
const MaxPending = 4096

// TransferStats count what a fleet's engines did.
type TransferStats struct {
	Prefills, Decodes, LocalDecodes int
}

// NewTransfer returns an empty medium.
func NewTransfer() *Transfer {
	return &Transfer{pending: map[string]handover{}, arrived: make(chan struct{})}
}

// Stats are the counts so far.
func (t *Transfer) Stats() TransferStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Violations are the requests refused, each with why.
func (t *Transfer) Violations() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.violations)
}

// Pending is the number of prompts handed over and not yet taken.
func (t *Transfer) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

func (t *Transfer) violation(role, proto, format string, args ...any) error {
	err := fmt.Errorf("simulated %s %s engine: %s", proto, role, fmt.Sprintf(format, args...))
	t.mu.Lock()
	t.violations = append(t.violations, err.Error())
	t.mu.Unlock()
	return err
}

func (t *Transfer) put(key string, h handover) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.pending[key]; dup {
		return fmt.Errorf("transfer key %s handed over twice", key)
	}
	if len(t.pending) >= MaxPending {
		return fmt.Errorf("%d prompts wait for their decode engine", MaxPending)
	}
	t.pending[key] = h
	t.stats.Prefills++
	close(t.arrived)
	t.arrived = make(chan struct{})
	return nil
}

// take removes key's prompt; with wait it waits for it until ctx ends.
func (t *Transfer) take(ctx context.Context, key string, wait bool) (handover, bool) {
	for {
		t.mu.Lock()
		h, ok := t.pending[key]
		if ok {
			delete(t.pending, key)
			t.stats.Decodes++
		}
		arrived := t.arrived
		t.mu.Unlock()
		if ok || !wait {
			return h, ok
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return handover{}, false
		}
	}
}

func (t *Transfer) id() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	return strconv.FormatUint(t.next, 10)
}

func (t *Transfer) local() {
	t.mu.Lock()
	t.stats.LocalDecodes++
	t.mu.Unlock()
}

// disaggLeg is what one request of a pair's engine does besides serving:
// hand its prompt over after the prefill (key), add the protocol's fields
// to its whole answer.
type disaggLeg struct {
	o        *DisaggOptions
	key      string
	tokens   []uint32
	decorate func(ans map[string]any, blocks int)
}

// legFields are the transfer fields of a request body.
type legFields struct {
	KV         map[string]any `json:"kv_transfer_params"`
	Host       *string        `json:"bootstrap_host"`
	Port       json.Number    `json:"bootstrap_port"`
	Room       *json.Number   `json:"bootstrap_room"`
	Disagg     map[string]any `json:"disaggregated_params"`
	Stream     *bool          `json:"stream"`
	MaxTokens  *int           `json:"max_tokens"`
	MaxCompl   *int           `json:"max_completion_tokens"`
	StreamOpts any            `json:"stream_options"`
	TokenIDs   []uint32       `json:"prompt_token_ids"`
}

// admit checks a request against the engine's role and protocol, and
// returns what serving it does besides (nil: a plain local request) and
// its prompt (a TensorRT-LLM chat decode leg's is its prompt_token_ids).
func (o *DisaggOptions) admit(ctx context.Context, body []byte, tokens []uint32) (*disaggLeg, []uint32, error) {
	var f legFields
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // ids past 2^53 stay exact
	if err := d.Decode(&f); err != nil {
		return nil, nil, o.Transfer.violation(o.Role, o.Protocol, "transfer fields: %v", err)
	}
	if o.Role == RolePrefill {
		leg, err := o.prefill(f, tokens)
		return leg, tokens, err
	}
	return o.decode(ctx, f, tokens)
}

func (o *DisaggOptions) prefill(f legFields, tokens []uint32) (*disaggLeg, error) {
	t := o.Transfer
	bad := func(format string, args ...any) (*disaggLeg, error) {
		return nil, t.violation(o.Role, o.Protocol, format, args...)
	}
	leg := &disaggLeg{o: o, tokens: tokens}
	switch o.Protocol {
	case "vllm":
		want := map[string]any{"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": nil, "remote_block_ids": nil,
			"remote_host": nil, "remote_port": nil}
		switch {
		case !reflect.DeepEqual(f.KV, want):
			return bad("kv_transfer_params %v, want %v", f.KV, want)
		case f.MaxTokens == nil || *f.MaxTokens != 1:
			return bad("max_tokens must be 1")
		case f.MaxCompl != nil && *f.MaxCompl != 1:
			return bad("max_completion_tokens %d, want 1", *f.MaxCompl)
		case f.Stream == nil || *f.Stream:
			return bad("stream must be false")
		case f.StreamOpts != nil:
			return bad("stream_options on a prefill leg")
		}
		leg.key = t.id()
		leg.decorate = func(ans map[string]any, blocks int) {
			ids := make([]int, blocks)
			for i := range ids {
				ids[i] = i
			}
			ans["kv_transfer_params"] = map[string]any{"do_remote_prefill": true, "do_remote_decode": false, "remote_engine_id": o.engineID(),
				"remote_block_ids": ids, "remote_host": "127.0.0.1", "remote_port": 5600, "remote_request_id": leg.key, "tp_size": 1}
		}
	case "sglang":
		room, err := o.bootstrap(f)
		if err != nil {
			return bad("%v", err)
		}
		leg.key = room
	case "trtllm":
		id, _ := strconv.ParseUint(fmt.Sprint(f.Disagg["disagg_request_id"]), 10, 64)
		switch {
		case f.Disagg["request_type"] != "context_only":
			return bad("disaggregated_params %v, want request_type context_only", f.Disagg)
		case id < 1<<40 || id >= 1<<63:
			return bad("disagg_request_id %v, want a global id in [2^40, 2^63)", f.Disagg["disagg_request_id"])
		case f.Stream == nil || *f.Stream:
			return bad("stream must be false")
		}
		leg.key = t.id()
		leg.decorate = func(ans map[string]any, _ int) {
			c := ans["choices"].([]any)[0].(map[string]any)
			c["disaggregated_params"] = map[string]any{"request_type": "context_only", "first_gen_tokens": []int{7}, "ctx_request_id": json.Number(leg.key),
				"disagg_request_id": id, "encoded_opaque_state": "c2lt"}
			ans["prompt_token_ids"] = tokens
		}
	default:
		return bad("unknown protocol")
	}
	return leg, nil
}

// bootstrap checks SGLang's fields against the prefill engine's address;
// the room is the transfer key.
func (o *DisaggOptions) bootstrap(f legFields) (string, error) {
	port := ""
	if o.BootstrapPort != 0 {
		port = strconv.Itoa(int(o.BootstrapPort))
	}
	switch {
	case f.Host == nil || *f.Host != o.BootstrapHost:
		return "", fmt.Errorf("bootstrap_host %v, want %q", f.Host, o.BootstrapHost)
	case string(f.Port) != port:
		return "", fmt.Errorf("bootstrap_port %q, want %q", f.Port, port)
	case f.Room == nil:
		return "", errors.New("no bootstrap_room")
	}
	room, err := strconv.ParseUint(f.Room.String(), 10, 64)
	if err != nil || room >= 1<<63 {
		return "", fmt.Errorf("bootstrap_room %s, want an integer in [0, 2^63)", f.Room)
	}
	return f.Room.String(), nil
}

func (o *DisaggOptions) decode(ctx context.Context, f legFields, tokens []uint32) (*disaggLeg, []uint32, error) {
	t := o.Transfer
	bad := func(format string, args ...any) (*disaggLeg, []uint32, error) {
		return nil, nil, t.violation(o.Role, o.Protocol, format, args...)
	}
	var key, from string
	var wait bool
	switch o.Protocol {
	case "vllm":
		if f.KV == nil {
			t.local()
			return nil, tokens, nil
		}
		if f.KV["do_remote_prefill"] != true || f.KV["do_remote_decode"] != false {
			return bad("kv_transfer_params %v: want do_remote_prefill true, do_remote_decode false", f.KV)
		}
		key, from = fmt.Sprint(f.KV["remote_request_id"]), fmt.Sprint(f.KV["remote_engine_id"])
	case "sglang":
		if f.Host == nil || f.Room == nil {
			return bad("a decode engine needs bootstrap_host and bootstrap_room")
		}
		key, from, wait = f.Room.String(), *f.Host+":"+string(f.Port), true
	case "trtllm":
		if f.Disagg == nil {
			t.local()
			return nil, tokens, nil
		}
		if f.Disagg["request_type"] != "generation_only" {
			return bad("disaggregated_params %v, want request_type generation_only", f.Disagg)
		}
		key = fmt.Sprint(f.Disagg["ctx_request_id"])
		if f.TokenIDs != nil {
			tokens = f.TokenIDs
		}
	default:
		return bad("unknown protocol")
	}
	h, ok := t.take(ctx, key, wait)
	switch {
	case !ok && ctx.Err() != nil:
		return nil, nil, ctx.Err()
	case !ok:
		return bad("no prompt handed over under %s", key)
	case from != "" && h.from != from:
		return bad("params name %s, the prompt came from %s", from, h.from)
	case !slices.Equal(h.tokens, tokens):
		return bad("the transferred prompt (%d tokens) is not the request's (%d)", len(h.tokens), len(tokens))
	}
	return nil, tokens, nil
}

func (o *DisaggOptions) engineID() string {
	if o.EngineID == "" {
		return "sim-prefill"
	}
	return o.EngineID
}

// from is the prefill engine's transfer address as the decode leg names it.
func (o *DisaggOptions) from() string {
	switch o.Protocol {
	case "vllm":
		return o.engineID()
	case "sglang":
		port := ""
		if o.BootstrapPort != 0 {
			port = strconv.Itoa(int(o.BootstrapPort))
		}
		return o.BootstrapHost + ":" + port
	}
	return ""
}

// served hands a prefill leg's prompt over once its blocks are computed.
func (l *disaggLeg) served(blocks int) error {
	if l == nil || l.key == "" {
		return nil
	}
	return l.o.Transfer.put(l.key, handover{tokens: l.tokens, from: l.o.from(), blocks: blocks})
}

// check validates the options at ServeHTTP.
func (o *DisaggOptions) check() error {
	switch {
	case o.Role != RolePrefill && o.Role != RoleDecode:
		return fmt.Errorf("simengine: disaggregation role %q, want %s or %s", o.Role, RolePrefill, RoleDecode)
	case !slices.Contains([]string{"vllm", "sglang", "trtllm"}, o.Protocol):
		return fmt.Errorf("simengine: disaggregation protocol %q, want vllm, sglang or trtllm", o.Protocol)
	case o.Transfer == nil:
		return errors.New("simengine: a disaggregated engine needs its fleet's Transfer")
	}
	return nil
}

// disaggStatus is the status of a refused request.
const disaggStatus = http.StatusBadRequest
