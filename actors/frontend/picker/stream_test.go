package picker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
)

// step is one scenario step: a message from the data plane, the router's
// answer to the last Route, or the stream's end; want lists the actions.
type step struct {
	in     *extprocv3.ProcessingRequest
	decide []string // endpoints (with err nil)
	reason string   // the load-only reason of the decision
	err    error
	reset  bool
	want   []string
}

func describeAction(a Action) string {
	switch a.Kind {
	case Send:
		return et.Describe(a.Response)
	case Route:
		s := fmt.Sprintf("route model=%s prompt=%s max=%d", a.Request.Model, describePrompt(a.Prompt), a.Request.MaxEndpoints)
		if a.Request.Subsetted {
			s += " subset=" + strings.Join(a.Request.Subset, "|")
		}
		return s
	case Served:
		return "served " + a.Endpoint
	case FirstByte:
		return "first_byte"
	case Done:
		return "done"
	case Answered:
		return fmt.Sprintf("answered %q %d", a.Endpoint, a.Status)
	case Decided:
		if a.Reason != "" {
			return "decided " + a.Outcome.String() + " " + a.Reason
		}
		return "decided " + a.Outcome.String()
	case End:
		return "end"
	case Fail:
		return "fail"
	}
	return "?"
}

func play(t *testing.T, cfg StreamConfig, steps []step) {
	t.Helper()
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxEndpoints == 0 {
		cfg.MaxEndpoints = 3
	}
	if cfg.DefaultModel == "" {
		cfg.DefaultModel = "default"
	}
	st := NewStream(cfg, "r1")
	for i, s := range steps {
		var acts []Action
		switch {
		case s.in != nil:
			acts = st.Handle(s.in)
		case s.reset:
			acts = st.Reset()
		default:
			acts = st.Decide(Decision{Choice: Choice{Endpoints: s.decide}, Reason: s.reason, Err: s.err})
		}
		got := make([]string, len(acts))
		for j, a := range acts {
			got[j] = describeAction(a)
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d: got\n\t%q\nwant\n\t%q", i, got, s.want)
		}
	}
}

const tokenBody = `{"model":"m","prompt":[1,2,3,4,5,6,7,8],"stream":true}`

func TestStreamScenarios(t *testing.T) {
	fd, buf := et.FullDuplex, et.Buffered
	n := fmt.Sprint(len(tokenBody))
	half := len(tokenBody) / 2
	cases := map[string]struct {
		cfg   StreamConfig
		steps []step
	}{
		"full duplex: body held until its end, then headers, body back, response given back": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody[:half], false)},
			{in: et.RequestBody(tokenBody[half:], true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"10.0.0.1:8000", "10.0.0.2:8000"}, want: []string{
				"req_headers dest=10.0.0.1:8000,10.0.0.2:8000 len=" + n + " clear meta=10.0.0.1:8000,10.0.0.2:8000",
				"req_body streamed=" + n + " eos", "decided routed"}},
			{in: et.ResponseHeaders("200", "10.0.0.1:8000", false), want: []string{"resp_headers", "served 10.0.0.1:8000", "answered \"10.0.0.1:8000\" 200"}},
			{in: et.ResponseBody("data: a\n\n", false, "10.0.0.1:8000"), want: []string{"resp_body streamed=9", "first_byte"}},
			{in: et.ResponseBody("data: [DONE]\n\n", false, ""), want: []string{"resp_body streamed=14"}},
			{in: et.ResponseBody("", true, ""), want: []string{"resp_body streamed=0 eos", "done"}},
			{reset: true},
		}},
		"buffered (AIBrix): headers answered at once, destination in the body answer": {steps: []step{
			{in: et.RequestHeaders(&buf, "/v1/completions", false, nil), want: []string{"req_headers"}},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"10.0.0.1:8000"}, want: []string{"req_body dest=10.0.0.1:8000 clear meta=10.0.0.1:8000", "decided routed"}},
			{in: et.ResponseHeaders("200", "", false), want: []string{"resp_headers", "answered \"\" 200"}},
			{in: et.ResponseBody("x", false, ""), want: []string{"resp_body", "first_byte"}},
			{in: et.ResponseBody("y", true, ""), want: []string{"resp_body", "done"}},
		}},
		"mode from the config when the data plane does not say": {cfg: StreamConfig{Modes: Modes(buf)}, steps: []step{
			{in: et.RequestHeaders(nil, "/v1/completions", false, nil), want: []string{"req_headers"}},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
		}},
		"protocol_config overrides the config": {cfg: StreamConfig{Modes: Modes(buf)}, steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
		}},
		"served elsewhere after a retry": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"a:1", "b:1"}, want: []string{"req_headers dest=a:1,b:1 len=" + n + " clear meta=a:1,b:1", "req_body streamed=" + n + " eos", "decided routed"}},
			{in: et.ResponseHeaders("200", "b:1", false), want: []string{"resp_headers", "served b:1", "answered \"b:1\" 200"}},
			{in: et.ResponseBody("x", true, "b:1"), want: []string{"resp_body streamed=1 eos", "first_byte", "done"}},
		}},
		"reset mid-response frees once": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"a:1"}, want: []string{"req_headers dest=a:1 len=" + n + " clear meta=a:1", "req_body streamed=" + n + " eos", "decided routed"}},
			{in: et.ResponseHeaders("200", "a:1", false), want: []string{"resp_headers", "served a:1", "answered \"a:1\" 200"}},
			{in: et.ResponseBody("x", false, ""), want: []string{"resp_body streamed=1", "first_byte"}},
			{reset: true, want: []string{"done"}},
			{reset: true},
			{in: et.ResponseBody("y", true, "")},
		}},
		"reset before the decision books nothing": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody[:5], false)},
			{reset: true},
		}},
		"response trailers end the response": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"a:1"}, want: []string{"req_headers dest=a:1 len=" + n + " clear meta=a:1", "req_body streamed=" + n + " eos", "decided routed"}},
			{in: et.ResponseHeaders("200", "", false), want: []string{"resp_headers", "answered \"\" 200"}},
			{in: et.ResponseBody("x", false, ""), want: []string{"resp_body streamed=1", "first_byte"}},
			{in: et.ResponseTrailers(), want: []string{"resp_trailers", "done"}},
		}},
		"response without a body": {steps: []step{
			{in: et.RequestHeaders(&buf, "/v1/completions", false, nil), want: []string{"req_headers"}},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"a:1"}, want: []string{"req_body dest=a:1 clear meta=a:1", "decided routed"}},
			{in: et.ResponseHeaders("204", "a:1", true), want: []string{"resp_headers", "served a:1", "answered \"a:1\" 204", "done"}},
		}},
		"request trailers end a full-duplex body": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, false)},
			{in: et.RequestTrailers(), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"a:1"}, want: []string{"req_headers dest=a:1 len=" + n + " clear meta=a:1", "req_body streamed=" + n, "req_trailers", "decided routed"}},
		}},
		"subset hint restricts the route": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, et.SubsetHint("a:1", "b:1"))},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3 subset=a:1|b:1"}},
			{decide: []string{"b:1"}, want: []string{"req_headers dest=b:1 len=" + n + " clear meta=b:1", "req_body streamed=" + n + " eos", "decided routed"}},
		}},
		"no eligible endpoint in the subset: 503": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, et.SubsetHint("z:1"))},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3 subset=z:1"}},
			{err: fmt.Errorf("%w: none of the subset", ErrNoEndpoint), want: []string{"immediate 503", "decided subset_unavailable", "end"}},
			{in: et.ResponseHeaders("200", "", false)},
			{reset: true},
		}},
		"empty subset: 503 without asking the router": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, et.SubsetHint())},
			{in: et.RequestBody(tokenBody, true), want: []string{"immediate 503", "decided subset_unavailable", "end"}},
		}},
		"no ready endpoint: 503": {steps: []step{
			{in: et.RequestHeaders(&buf, "/v1/completions", false, nil), want: []string{"req_headers"}},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{err: ErrNoEndpoint, want: []string{"immediate 503", "decided no_endpoint", "end"}},
		}},
		"overloaded: 429": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{err: ErrOverloaded, want: []string{"immediate 429", "decided overloaded", "end"}},
		}},
		"router failure: 500": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{err: errors.New("actor timeout"), want: []string{"immediate 500", "decided error", "end"}},
		}},
		"not JSON: 400": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(`{"model":`, true), want: []string{"immediate 400", "decided invalid", "end"}},
		}},
		"body past the bound: 413": {cfg: StreamConfig{MaxBody: 10}, steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, false), want: []string{"immediate 413", "decided too_large", "end"}},
		}},
		"no body: routed on the headers by load": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/models", true, nil, "x-gateway-model-name", "m"), want: []string{"route model=m prompt=none:no_body max=3"}},
			{decide: []string{"a:1"}, reason: ReasonNoBody, want: []string{"req_headers dest=a:1 clear meta=a:1", "decided load_only no_body"}},
		}},
		"streamed request mode: routed on the headers, chunks answered unchanged": {steps: []step{
			{in: et.RequestHeaders(&et.Streamed, "/v1/completions", false, nil), want: []string{"route model=default prompt=none:no_body max=3"}},
			{decide: []string{"a:1"}, reason: ReasonNoBody, want: []string{"req_headers dest=a:1 clear meta=a:1", "decided load_only no_body"}},
			{in: et.RequestBody(tokenBody, true), want: []string{"req_body"}},
			{in: et.ResponseHeaders("200", "", false), want: []string{"resp_headers", "answered \"\" 200"}},
		}},
		"chat: routed by load when the decision says so": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/chat/completions", false, nil)},
			{in: et.RequestBody(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true), want: []string{"route model=m prompt=chat max=3"}},
			{decide: []string{"a:1"}, reason: "no_engine", want: []string{"req_headers dest=a:1 len=57 clear meta=a:1", "req_body streamed=57 eos", "decided load_only no_engine"}},
		}},
		"text prompt": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(`{"model":"m","prompt":"hello"}`, true), want: []string{"route model=m prompt=text:5 max=3"}},
		}},
		"out of order: response before the route": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.ResponseHeaders("200", "", false), want: []string{"fail"}},
		}},
		"out of order: request headers twice": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil), want: []string{"fail"}},
		}},
		"a long response chunk goes back in pieces, then the bookkeeping": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(tokenBody, true), want: []string{"route model=m prompt=ids:8 max=3"}},
			{decide: []string{"a:1"}, want: []string{"req_headers dest=a:1 len=" + n + " clear meta=a:1", "req_body streamed=" + n + " eos", "decided routed"}},
			{in: et.ResponseHeaders("200", "", false), want: []string{"resp_headers", "answered \"\" 200"}},
			{in: et.ResponseBody(strings.Repeat("x", 70000), true, "a:1"), want: []string{"resp_body streamed=62000", "resp_body streamed=8000 eos", "served a:1", "first_byte", "done"}},
		}},
		"a long body goes back in chunks": {steps: []step{
			{in: et.RequestHeaders(&fd, "/v1/completions", false, nil)},
			{in: et.RequestBody(longBody(150000), true), want: []string{"route model=m prompt=ids:2 max=3"}},
			{decide: []string{"a:1"}, want: []string{"req_headers dest=a:1 len=150000 clear meta=a:1",
				"req_body streamed=62000", "req_body streamed=62000", "req_body streamed=26000 eos", "decided routed"}},
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { play(t, c.cfg, c.steps) })
	}
}

// longBody is a token-id completion request padded to n bytes.
func longBody(n int) string {
	head := `{"model":"m","prompt":[1,2],"pad":"`
	return head + strings.Repeat("x", n-len(head)-2) + `"}`
}

func describePrompt(p Prompt) string {
	switch {
	case p.Reason != "":
		return "none:" + p.Reason
	case p.Chat != nil:
		return "chat"
	case p.Completion.IsText:
		return fmt.Sprintf("text:%d", len(p.Completion.Text))
	}
	return fmt.Sprintf("ids:%d", len(p.Completion.IDs))
}
