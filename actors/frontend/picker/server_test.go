package picker

import (
	"fmt"
	"strings"
	"testing"

	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
)

var (
	fdModes  = et.FullDuplex
	bufModes = et.Buffered
	// withFallbacks answers with up to three endpoints.
	withFallbacks = Config{Stream: StreamConfig{MaxEndpoints: 3}}
)

func TestFakeEnvoyFullDuplex(t *testing.T) {
	core := newFakeCore("10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000")
	s, envoy := startPicker(t, core, withFallbacks)
	h := envoy.Open()
	n := fmt.Sprint(len(tokenBody))
	// Envoy sends headers and every chunk without waiting for an answer.
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil),
		et.RequestBody(tokenBody[:10], false), et.RequestBody(tokenBody[10:], true))
	rs := h.Expect("req_headers dest=10.0.0.1:8000,10.0.0.2:8000,10.0.0.3:8000 len="+n+" clear meta=10.0.0.1:8000,10.0.0.2:8000,10.0.0.3:8000",
		"req_body streamed="+n+" eos")
	if got := string(rs[1].GetRequestBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody()); got != tokenBody {
		t.Fatalf("body given back %q, want the request's %q", got, tokenBody)
	}
	h.Send(et.ResponseHeaders("200", "10.0.0.1:8000", false))
	h.Expect("resp_headers")
	h.Send(et.ResponseBody("data: {}\n\n", false, "10.0.0.1:8000"), et.ResponseBody("data: [DONE]\n\n", true, "10.0.0.1:8000"))
	h.Expect("resp_body streamed=10", "resp_body streamed=14 eos")
	h.Finish()
	callsAre(t, core, "pick 10.0.0.1:8000", "served 10.0.0.1:8000", "first_byte", "done")
	if _, booked := core.snapshot(); booked != 0 {
		t.Fatalf("%d requests still booked", booked)
	}
	if p := core.picks[0]; p.Model != "m" || len(p.Tokens) != 8 || p.Subsetted {
		t.Fatalf("routed %+v", p)
	}
	if o := s.Outcomes(); o[OutcomeRouted] != 1 || len(o) != 1 {
		t.Fatalf("outcomes %v", o)
	}
}

func TestFakeEnvoyBuffered(t *testing.T) {
	core := newFakeCore("10.0.0.1:8000", "10.0.0.2:8000") // one endpoint answered: no fallbacks by default
	_, envoy := startPicker(t, core, Config{})
	h := envoy.Open()
	// Envoy waits for each answer in BUFFERED mode.
	h.Send(et.RequestHeaders(&bufModes, "/v1/completions", false, nil))
	h.Expect("req_headers")
	h.Send(et.RequestBody(tokenBody, true))
	h.Expect("req_body dest=10.0.0.1:8000 clear meta=10.0.0.1:8000")
	h.Send(et.ResponseHeaders("200", "10.0.0.1:8000", false))
	h.Expect("resp_headers")
	h.Send(et.ResponseBody("{}", false, ""))
	h.Expect("resp_body")
	h.Send(et.ResponseBody("", true, ""))
	h.Expect("resp_body")
	h.Finish()
	callsAre(t, core, "pick 10.0.0.1:8000", "served 10.0.0.1:8000", "first_byte", "done")
}

func TestFakeEnvoyServedAfterRetry(t *testing.T) {
	core := newFakeCore("a:1", "b:1")
	s, envoy := startPicker(t, core, withFallbacks)
	h := envoy.Open()
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil), et.RequestBody(tokenBody, true))
	h.Expect("req_headers dest=a:1,b:1 len="+fmt.Sprint(len(tokenBody))+" clear meta=a:1,b:1", "req_body streamed="+fmt.Sprint(len(tokenBody))+" eos")
	// a:1 refused the connection; Envoy's retry went to the next in the list.
	h.Send(et.ResponseHeaders("200", "b:1", false))
	h.Expect("resp_headers")
	callsAre(t, core, "pick a:1", "served b:1")
	core.mu.Lock()
	at := core.booked[core.picks[0].ID]
	core.mu.Unlock()
	if at != "b:1" {
		t.Fatalf("booked at %q, want the served b:1", at)
	}
	h.Send(et.ResponseBody("x", true, "b:1"))
	h.Expect("resp_body streamed=1 eos")
	h.Finish()
	callsAre(t, core, "pick a:1", "served b:1", "first_byte", "done")
	if got := s.metrics.bookings[bookServedMoved].Load(); got != 1 {
		t.Fatalf("served_moved = %d, want 1", got)
	}
}

func TestFakeEnvoySubsetAndRefusals(t *testing.T) {
	core := newFakeCore("a:1", "b:1", "c:1")
	s, envoy := startPicker(t, core, withFallbacks)
	body := func(h *et.Stream, md ...string) {
		h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, et.SubsetHint(md...)), et.RequestBody(tokenBody, true))
	}
	h := envoy.Open()
	body(h, "c:1", "b:1")
	h.Expect("req_headers dest=b:1,c:1 len="+fmt.Sprint(len(tokenBody))+" clear meta=b:1,c:1", "req_body streamed="+fmt.Sprint(len(tokenBody))+" eos")
	h.Finish()

	h = envoy.Open()
	body(h, "z:9")
	h.Expect("immediate 503")
	h.Closed()

	h = envoy.Open()
	body(h) // an empty subset
	h.Expect("immediate 503")
	h.Closed()

	core.mu.Lock()
	core.overload = true
	core.mu.Unlock()
	h = envoy.Open()
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil), et.RequestBody(tokenBody, true))
	h.Expect("immediate 429")
	h.Closed()

	_, envoy2 := startPicker(t, newFakeCore(), Config{})
	h = envoy2.Open()
	h.Send(et.RequestHeaders(&bufModes, "/v1/completions", false, nil))
	h.Expect("req_headers")
	h.Send(et.RequestBody(tokenBody, true))
	h.Expect("immediate 503")
	h.Closed()

	callsAre(t, core, "pick b:1", "done") // the refused requests booked nothing
	if o := s.Outcomes(); o[OutcomeRouted] != 1 || o[OutcomeSubset] != 2 || o[OutcomeOverloaded] != 1 {
		t.Fatalf("outcomes %v", o)
	}
	if len(core.picks) != 3 { // the empty subset never reached the router
		t.Fatalf("%d picks, want 3", len(core.picks))
	}
	var text strings.Builder
	if err := s.WriteMetrics(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`kvrouter_epp_requests_total{outcome="subset_unavailable"} 2`,
		`kvrouter_epp_requests_total{outcome="overloaded"} 1`, `kvrouter_epp_bookings_total{event="done"} 1`,
		`kvrouter_epp_decision_seconds_count 3`} {
		if !strings.Contains(text.String(), line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, text.String())
		}
	}
}

func TestFakeEnvoyResetMidResponseFrees(t *testing.T) {
	core := newFakeCore("a:1")
	s, envoy := startPicker(t, core, Config{})
	h := envoy.Open()
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil), et.RequestBody(tokenBody, true))
	h.Expect("req_headers dest=a:1 len="+fmt.Sprint(len(tokenBody))+" clear meta=a:1", "req_body streamed="+fmt.Sprint(len(tokenBody))+" eos")
	h.Send(et.ResponseHeaders("200", "a:1", false), et.ResponseBody("data: {}\n\n", false, ""))
	h.Expect("resp_headers", "resp_body streamed=10")
	h.Cancel() // the client went away: Envoy resets the ext_proc stream
	callsAre(t, core, "pick a:1", "served a:1", "first_byte", "done")
	waitFor(t, "no stream in flight", func() (bool, any) {
		n := s.metrics.inFlight.Load()
		return n == 0, n
	})
	if _, booked := core.snapshot(); booked != 0 {
		t.Fatalf("%d requests still booked", booked)
	}
}

func TestTraceContinuesTraceparent(t *testing.T) {
	exp := spantest.Install(t, nil)
	core := newFakeCore("a:1")
	_, envoy := startPicker(t, core, Config{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	h := envoy.Open()
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01"),
		et.RequestBody(tokenBody, true))
	h.Expect("req_headers dest=a:1 len="+fmt.Sprint(len(tokenBody))+" clear meta=a:1", "req_body streamed="+fmt.Sprint(len(tokenBody))+" eos")
	h.Send(et.ResponseHeaders("200", "a:1", true))
	h.Expect("resp_headers")
	h.Finish()
	waitFor(t, "the request's span", func() (bool, any) {
		spans := spantest.ByName(exp, SpanRequest)
		return len(spans) == 1, len(spans)
	})
	sp := spantest.ByName(exp, SpanRequest)[0]
	if sp.SpanContext.TraceID().String() != traceID || sp.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("span in trace %s under %s, want the traceparent's", sp.SpanContext.TraceID(), sp.Parent.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range sp.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["kvrouter.outcome"] != "routed" || attrs["kvrouter.endpoint"] != "a:1" || attrs["gen_ai.request.model"] != "m" {
		t.Fatalf("span attributes %v", attrs)
	}
}
