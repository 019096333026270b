package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/actors/telemetry"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
)

// retryFleet is kvrouter's service splitting every request (disagg
// always) over a simulated decode engine (worker 1) and prefill engines
// 8 and 9 (9 only when asked for) of one protocol, each behind a tap.
// Prefill worker 8 holds the prefixes of the prompts it was warmed with,
// so the router chooses it for them; 9 is their alternate. The proxy
// has PrefillRetries set by the caller and the fleet's metrics.
type retryFleet struct {
	*fleet
	be  *splitBackend
	tr  *simengine.Transfer
	dec *tap
	pre map[messages.WorkerID]*tap
	m   *telemetry.Metrics
}

// Bootstrap ports of the SGLang prefill engines, by worker.
var retryBootstrap = map[messages.WorkerID]uint16{8: 8998, 9: 8999}

func newRetryFleet(t *testing.T, proto string, prefills []messages.WorkerID, warm [][]uint32, opts Options, pc requestpath.Config) *retryFleet {
	t.Helper()
	rc := routing.DefaultConfig()
	rc.Disagg = disagg.DefaultConfig()
	rc.Disagg.Mode = disagg.ModeAlways
	svc := newRoutingService(t, rc)
	f := &retryFleet{tr: simengine.NewTransfer(), pre: map[messages.WorkerID]*tap{}, m: testMetrics(t)}
	f.fleet = &fleet{t: t, svc: svc}
	add := func(id messages.WorkerID, d simengine.DisaggOptions) *tap {
		d.Protocol, d.Transfer = proto, f.tr
		eng, hs := simEngine(t, simengine.HTTPOptions{CompletionTokens: 3, Disagg: &d})
		tp := newTap(t, hs.ServingEndpoint())
		reg := api.Registration{InstanceID: id, Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "m",
			TenantID: api.DefaultTenant, ServingEndpoint: tp.addr(), Role: api.RoleDecode}
		if d.Role == simengine.RolePrefill {
			reg.Role, reg.BootstrapHost, reg.BootstrapPort = api.RolePrefill, d.BootstrapHost, d.BootstrapPort
		}
		if err := svc.Register(context.Background(), reg); err != nil {
			t.Fatal(err)
		}
		f.engines, f.https = append(f.engines, eng), append(f.https, hs)
		return tp
	}
	f.dec = add(1, simengine.DisaggOptions{Role: simengine.RoleDecode})
	for _, id := range prefills {
		f.pre[id] = add(id, simengine.DisaggOptions{Role: simengine.RolePrefill, BootstrapHost: "127.0.0.1",
			BootstrapPort: retryBootstrap[id], EngineID: fmt.Sprintf("e-pre%d", id)})
	}
	for _, w := range warm {
		f.engines[1].Serve(w, "")
	}
	opts.Meter = proxyMeter(f.m)
	opts.Disagg.Engines = func(id messages.WorkerID) string {
		if f.pre[id] != nil {
			return proto
		}
		return ""
	}
	if opts.Disagg.Rand == nil {
		opts.Disagg.Rand = ones{}
	}
	f.be = &splitBackend{Service: svc}
	f.serve(f.be, pc, opts)
	return f
}

// complete posts the split test's client body (splitClient, streamed)
// under request id: the status and the answer's data events.
func (f *retryFleet) complete(id string) (int, []string, http.Header) {
	f.t.Helper()
	return f.completeWith(splitClient, id)
}

func (f *retryFleet) completeWith(body, id string) (int, []string, http.Header) {
	f.t.Helper()
	resp, err := f.post(context.Background(), "/v1/completions", body, RequestIDHeader, id)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	events, _ := sseEvents(resp.Body)
	return resp.StatusCode, events, resp.Header
}

// idle waits until nothing is booked: no booking in flight in the request
// path, no load on any rank, prefill workers included.
func (f *retryFleet) idle() {
	f.t.Helper()
	waitFor(f.t, "every booking and load back to zero", func() (bool, any) {
		if n := f.path.InFlight(); n != 0 {
			return false, fmt.Sprintf("%d bookings in flight", n)
		}
		spaces, err := f.svc.Loads(context.Background(), api.LoadsFilter{})
		if err != nil || len(spaces) != 1 {
			return false, fmt.Sprint(spaces, err)
		}
		for _, l := range spaces[0].Loads {
			if l.PotentialPrefillTokens != 0 || l.PotentialDecodeBlocks != 0 || l.ActiveRequests != 0 {
				return false, fmt.Sprintf("load %+v", spaces[0].Loads)
			}
		}
		return true, ""
	})
}

// prefillLoads is the booked load of each prefill worker now.
func (f *retryFleet) prefillLoads() map[messages.WorkerID]api.PotentialLoad {
	spaces, _ := f.svc.Loads(context.Background(), api.LoadsFilter{})
	out := map[messages.WorkerID]api.PotentialLoad{}
	for _, s := range spaces {
		for _, l := range s.Loads {
			if f.pre[l.WorkerID] != nil {
				out[l.WorkerID] = l
			}
		}
	}
	return out
}

// waitMetrics waits until the proxy's /metrics text satisfies ok.
func (f *retryFleet) waitMetrics(what string, ok func(text string) bool) {
	f.t.Helper()
	waitFor(f.t, what, func() (bool, any) {
		text := scrape(f.t, f.m)
		return ok(text), text
	})
}

// The ways a first prefill engine refuses a leg another one may take.
var (
	// dropConnection closes the connection without an answer.
	dropConnection answerFunc = func(w http.ResponseWriter, _ func(http.ResponseWriter)) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}
	// answerWithoutParams answers 200 with a completion that carries no
	// transfer params.
	answerWithoutParams answerFunc = func(w http.ResponseWriter, _ func(http.ResponseWriter)) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":"a","finish_reason":"length"}]}`)
	}
)

// warmPrompt is the first 2 blocks of splitPrompt (ids(7, 9)): warmed on
// prefill worker 8, it makes 8 the router's choice and 9 the alternate.
var warmPrompt = ids(7, 8)

// A vLLM prefill leg that fails on the router's prefill worker (8) — a
// 500, a connection dropped without an answer, a 200 without
// kv_transfer_params — is sent again to the route answer's alternate (9):
// the prefill booking moves there first (8's prefill load is released),
// the decode leg carries 9's params (the simulated decode engine takes
// the prompt from 9's engine id only), the client gets the whole stream,
// the retry is counted by what the failed leg got, and every booking and
// load is back to zero at the end.
func TestPrefillRetryOnTheAlternate(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		refuse       func(tp *tap)
	}{
		{"a 500", PrefillStatus, func(tp *tap) { tp.fail.Store(http.StatusInternalServerError) }},
		{"a dropped connection", PrefillConnect, func(tp *tap) { tp.answerWith(dropConnection) }},
		{"a 200 without kv_transfer_params", PrefillBadAnswer, func(tp *tap) { tp.answerWith(answerWithoutParams) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRetryFleet(t, "vllm", []messages.WorkerID{8, 9}, [][]uint32{warmPrompt}, Options{Disagg: DisaggOptions{PrefillRetries: 1}}, requestpath.Config{})
			tc.refuse(f.pre[8])
			loads := make(chan map[messages.WorkerID]api.PotentialLoad, 1)
			f.pre[9].answerWith(func(w http.ResponseWriter, pass func(http.ResponseWriter)) {
				loads <- f.prefillLoads()
				pass(w)
			})
			code, events, hdr := f.complete("r1")
			if code != http.StatusOK || len(events) != 5 || events[4] != "[DONE]" || hdr.Get(WorkerHeader) != "1:0" {
				t.Fatalf("client got %d from %q: %q", code, hdr.Get(WorkerHeader), events)
			}
			if n8, n9 := len(f.pre[8].seen()), len(f.pre[9].seen()); n8 != 1 || n9 != 1 {
				t.Fatalf("prefill legs: %d on worker 8, %d on worker 9; want one each", n8, n9)
			}
			if f.pre[8].seen()[0] != f.pre[9].seen()[0] {
				t.Errorf("the retried leg differs from the first:\n%s\n%s", f.pre[9].seen()[0], f.pre[8].seen()[0])
			}
			if got := f.dec.seen(); len(got) != 1 || !strings.Contains(got[0], `"remote_engine_id":"e-pre9"`) {
				t.Fatalf("decode engine got %q, want one leg with worker 9's params", got)
			}
			if st := f.tr.Stats(); st != (simengine.TransferStats{Prefills: 1, Decodes: 1}) || len(f.tr.Violations()) != 0 {
				t.Fatalf("transfer %+v, violations %q", st, f.tr.Violations())
			}
			during := <-loads
			if l8, l9 := during[8], during[9]; l8.ActiveRequests != 0 || l8.PotentialPrefillTokens != 0 || l9.ActiveRequests != 1 || l9.PotentialPrefillTokens == 0 {
				t.Errorf("prefill loads while worker 9 prefilled: 8 %+v, 9 %+v; want the booking moved from 8 to 9", l8, l9)
			}
			if got, want := fmt.Sprint(f.be.seen()), "[move_prefill r1 → 9 prefill_done r1 free r1]"; got != want {
				t.Errorf("bookkeeping %s, want %s", got, want)
			}
			if got := f.path.Metrics().Count("retries", "prefill_"+tc.reason, ""); got != 1 {
				t.Errorf("request path retries for prefill_%s: %d, want 1", tc.reason, got)
			}
			f.idle()
			f.waitMetrics("the retry on /metrics", func(text string) bool {
				return series(text, "kvrouter_proxy_prefill_retries_total", `protocol="vllm"`, `reason="`+tc.reason+`"`) == 1 &&
					series(text, "kvrouter_proxy_prefill_legs_total", `protocol="vllm"`, `outcome="`+tc.reason+`"`) == 1 &&
					series(text, "kvrouter_proxy_prefill_legs_total", `protocol="vllm"`, `outcome="ok"`) == 1 &&
					series(text, "kvrouter_proxy_prefill_fallbacks_total") == -1
			})
		})
	}
}

// The retried leg is a second prefill span, kvrouter.prefill_attempt 2 on
// worker 9, after attempt 1's failed one on worker 8.
func TestPrefillRetrySpans(t *testing.T) {
	exp := spantest.Install(t, nil)
	f := newRetryFleet(t, "vllm", []messages.WorkerID{8, 9}, [][]uint32{warmPrompt}, Options{Disagg: DisaggOptions{PrefillRetries: 1}}, requestpath.Config{})
	f.pre[8].fail.Store(http.StatusServiceUnavailable)
	if code, _, _ := f.complete("r1"); code != http.StatusOK {
		t.Fatalf("client got %d", code)
	}
	var got []string
	waitFor(t, "both prefill spans", func() (bool, any) {
		got = nil
		for _, s := range spantest.ByName(exp, SpanPrefill) {
			a := map[string]string{}
			for _, kv := range s.Attributes {
				a[string(kv.Key)] = kv.Value.Emit()
			}
			got = append(got, a["kvrouter.prefill_attempt"]+":"+a["kvrouter.worker_id"]+":"+a["kvrouter.prefill_outcome"])
		}
		return len(got) == 2, got
	})
	if fmt.Sprint(got) != "[1:8:bad_status 2:9:ok]" {
		t.Fatalf("prefill spans (attempt:worker:outcome) %v", got)
	}
	f.idle()
}

// No retry: with PrefillRetries 0 (the library's default) the failed leg
// falls back to the decode worker alone as before; nor on a 4xx (the
// request is the trouble); nor without an alternate (one prefill worker);
// nor a second time (the alternate failed too: fallback-local serves it,
// fail answers 502); nor once the retry budget is spent. The alternate
// gets no leg, the booking is not moved, nothing is left booked.
func TestPrefillNoRetry(t *testing.T) {
	both := []messages.WorkerID{8, 9}
	retry := Options{Disagg: DisaggOptions{PrefillRetries: 1}}
	for _, tc := range []struct {
		name     string
		prefills []messages.WorkerID
		opts     Options
		status   int32 // worker 8's answer
		alsoNine bool  // worker 9 answers it too
		code     int   // the client's status
		legs9    int   // prefill legs sent to 9
		calls    string
	}{
		{"retries off", both, Options{}, http.StatusInternalServerError, false, http.StatusOK, 0, "[prefill_done r1 free r1]"},
		{"a 4xx", both, retry, http.StatusBadRequest, false, http.StatusOK, 0, "[prefill_done r1 free r1]"},
		{"no alternate", []messages.WorkerID{8}, retry, http.StatusInternalServerError, false, http.StatusOK, 0, "[prefill_done r1 free r1]"},
		{"the alternate fails too", both, retry, http.StatusInternalServerError, true, http.StatusOK, 1, "[move_prefill r1 → 9 prefill_done r1 free r1]"},
		{"the alternate fails too, fail", both, Options{Disagg: DisaggOptions{PrefillRetries: 1, OnPrefillFailure: PrefillFail}},
			http.StatusInternalServerError, true, http.StatusBadGateway, 1, "[move_prefill r1 → 9 free r1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRetryFleet(t, "vllm", tc.prefills, [][]uint32{warmPrompt}, tc.opts, requestpath.Config{})
			f.pre[8].fail.Store(tc.status)
			if tc.alsoNine {
				f.pre[9].fail.Store(tc.status)
			}
			code, events, _ := f.complete("r1")
			if code != tc.code || (code == http.StatusOK && len(events) != 5) {
				t.Fatalf("client got %d %q, want %d", code, events, tc.code)
			}
			if n := len(f.pre[8].seen()); n != 1 {
				t.Fatalf("worker 8 got %d prefill legs, want 1", n)
			}
			if p9 := f.pre[9]; p9 != nil && len(p9.seen()) != tc.legs9 {
				t.Fatalf("worker 9 got %d prefill legs, want %d", len(p9.seen()), tc.legs9)
			}
			if got := f.dec.seen(); code == http.StatusOK && (len(got) != 1 || got[0] != splitPlain) {
				t.Fatalf("decode engine got %q, want the client's body alone", got)
			}
			if got := fmt.Sprint(f.be.seen()); got != tc.calls {
				t.Errorf("bookkeeping %s, want %s", got, tc.calls)
			}
			f.idle()
			want := float64(-1)
			if tc.legs9 > 0 {
				want = 1
			}
			f.waitMetrics("the retries and fallbacks", func(text string) bool {
				return series(text, "kvrouter_proxy_prefill_retries_total") == want &&
					series(text, "kvrouter_proxy_prefill_fallbacks_total", `reason="bad_status"`) == 1
			})
		})
	}

	t.Run("the retry budget spent", func(t *testing.T) {
		clk := frontendtest.NewClock()
		g := newTestGuard(t, clk, requestpath.GuardConfig{BreakerOff: true, RetryRatio: -1, RetryMin: 1})
		second := ids(6, 9)
		f := newRetryFleet(t, "vllm", both, [][]uint32{warmPrompt, second[:8]}, retry, requestpath.Config{Guard: g})
		f.pre[8].fail.Store(http.StatusInternalServerError)
		if code, _, _ := f.complete("r1"); code != http.StatusOK || len(f.pre[9].seen()) != 1 {
			t.Fatalf("first request: %d, %d legs on worker 9; want it retried there", code, len(f.pre[9].seen()))
		}
		if code, _, _ := f.completeWith(`{"model":"m","stream":true,"prompt":`+tokens(6, 9)+`}`, "r2"); code != http.StatusOK ||
			len(f.pre[8].seen()) != 2 || len(f.pre[9].seen()) != 1 {
			t.Fatalf("second request: %d, legs %d on 8 and %d on 9; want no retry past the budget", code, len(f.pre[8].seen()), len(f.pre[9].seen()))
		}
		if got := f.path.Metrics().Count("retries_refused", "budget", ""); got != 1 {
			t.Errorf("retries refused for the budget: %d, want 1", got)
		}
		f.idle()
	})
}

// seq is a random source giving 1, 2, 3, … to successive 63-bit draws
// (pdtransfer's rooms and request ids).
type seq struct{ n atomic.Uint64 }

func (s *seq) Read(b []byte) (int, error) {
	binary.BigEndian.PutUint64(b, s.n.Add(1)<<1)
	return len(b), nil
}

// SGLang sends both legs at once: a prefill leg refused (500) on worker 8
// cancels its decode leg before any byte reached the client, and both
// legs are sent again, with worker 9's bootstrap address and a fresh
// room; the client gets the second decode leg's stream.
func TestPrefillRetrySGLang(t *testing.T) {
	f := newRetryFleet(t, "sglang", []messages.WorkerID{8, 9}, [][]uint32{warmPrompt},
		Options{Disagg: DisaggOptions{PrefillRetries: 1, Rand: &seq{}}}, requestpath.Config{})
	decodeLegs := make(chan struct{}, 2)
	f.dec.answerWith(func(w http.ResponseWriter, pass func(http.ResponseWriter)) {
		decodeLegs <- struct{}{}
		pass(w)
	})
	f.pre[8].answerWith(func(w http.ResponseWriter, _ func(http.ResponseWriter)) {
		<-decodeLegs // fail once the first decode leg waits for its room
		http.Error(w, "unavailable", http.StatusInternalServerError)
	})
	code, events, _ := f.complete("r1")
	if code != http.StatusOK || len(events) != 5 {
		t.Fatalf("client got %d %q", code, events)
	}
	leg := func(port, room int) string {
		return fmt.Sprintf(`{"bootstrap_host":"127.0.0.1","bootstrap_port":%d,"bootstrap_room":%d,"model":"m","prompt":%s,"stream":true,"temperature":0.5}`,
			port, room, splitPrompt)
	}
	if got, want := fmt.Sprint(f.pre[8].seen(), f.pre[9].seen()), fmt.Sprint([]string{leg(8998, 1)}, []string{leg(8999, 2)}); got != want {
		t.Errorf("prefill legs (8, 9)\n%s\nwant\n%s", got, want)
	}
	if got, want := fmt.Sprint(f.dec.seen()), fmt.Sprint([]string{leg(8998, 1), leg(8999, 2)}); got != want {
		t.Errorf("decode legs\n%s\nwant\n%s", got, want)
	}
	if v := f.tr.Violations(); len(v) != 0 || f.tr.Stats().Decodes != 1 {
		t.Errorf("transfer %+v, violations %q", f.tr.Stats(), v)
	}
	if got, want := fmt.Sprint(f.be.seen()), "[move_prefill r1 → 9 prefill_done r1 free r1]"; got != want {
		t.Errorf("bookkeeping %s, want %s", got, want)
	}
	f.idle()
	f.waitMetrics("the retry on /metrics", func(text string) bool {
		return series(text, "kvrouter_proxy_prefill_retries_total", `protocol="sglang"`, `reason="bad_status"`) == 1
	})
}

// No retry once the client is gone or a byte reached it: a client that
// goes away during the first prefill leg frees its booking, the
// alternate gets nothing; an SGLang prefill leg that fails after its
// decode leg's first byte reached the client is not retried (the decode
// engine ends the answer, here whole).
func TestPrefillNoRetryAfterTheClient(t *testing.T) {
	retry := Options{Disagg: DisaggOptions{PrefillRetries: 1}}
	t.Run("client gone", func(t *testing.T) {
		f := newRetryFleet(t, "vllm", []messages.WorkerID{8, 9}, [][]uint32{warmPrompt}, retry, requestpath.Config{})
		f.pre[8].hold.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := f.post(ctx, "/v1/completions", splitClient, RequestIDHeader, "r1"); err == nil {
				resp.Body.Close()
			}
		}()
		<-f.pre[8].arrived
		cancel()
		<-done
		f.idle()
		if got := fmt.Sprint(f.be.seen()); got != "[free r1]" || len(f.pre[9].seen()) != 0 || len(f.dec.seen()) != 0 {
			t.Fatalf("bookkeeping %s, legs on 9 %d, decode legs %d; want only the free", got, len(f.pre[9].seen()), len(f.dec.seen()))
		}
		if n := series(scrape(t, f.m), "kvrouter_proxy_prefill_retries_total"); n != -1 {
			t.Fatalf("retries counted: %v", n)
		}
	})

	t.Run("answer started", func(t *testing.T) {
		fail, release := make(chan struct{}), make(chan struct{})
		f := newRetryFleet(t, "sglang", []messages.WorkerID{8, 9}, [][]uint32{warmPrompt}, retry, requestpath.Config{})
		f.pre[8].answerWith(func(w http.ResponseWriter, pass func(http.ResponseWriter)) {
			pass(httptest.NewRecorder()) // the engine prefills and hands the prompt over
			<-fail
			http.Error(w, "gone", http.StatusInternalServerError)
		})
		f.dec.answerWith(func(w http.ResponseWriter, pass func(http.ResponseWriter)) {
			pass(&heldAfterFirstWrite{ResponseWriter: w, hold: release})
		})
		resp, err := f.post(context.Background(), "/v1/completions", splitClient, RequestIDHeader, "r1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if line, err := readLine(resp.Body); err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("first chunk %q, %v", line, err)
		}
		close(fail) // the prefill leg fails while the decode engine holds its answer
		f.waitMetrics("the failed prefill leg", func(text string) bool {
			return series(text, "kvrouter_proxy_prefill_legs_total", `outcome="bad_status"`) == 1
		})
		close(release)
		events, _ := sseEvents(resp.Body)
		if resp.StatusCode != http.StatusOK || len(events) != 4 || events[3] != "[DONE]" {
			t.Fatalf("client got %d, then %q", resp.StatusCode, events)
		}
		f.idle()
		if len(f.pre[9].seen()) != 0 || len(f.dec.seen()) != 1 || fmt.Sprint(f.be.seen()) != "[prefill_done r1 free r1]" {
			t.Fatalf("legs on 9 %d, decode legs %d, bookkeeping %s: want no retry", len(f.pre[9].seen()), len(f.dec.seen()), f.be.seen())
		}
		if n := series(scrape(t, f.m), "kvrouter_proxy_prefill_retries_total"); n != -1 {
			t.Fatalf("retries counted: %v", n)
		}
	})
}

// heldAfterFirstWrite is a decode engine's answer that holds everything
// after its first write (flushed) until hold is closed.
type heldAfterFirstWrite struct {
	http.ResponseWriter
	hold    chan struct{}
	written bool
}

func (h *heldAfterFirstWrite) Write(b []byte) (int, error) {
	n, err := h.ResponseWriter.Write(b)
	h.Flush()
	if !h.written {
		h.written = true
		<-h.hold
	}
	return n, err
}

// Flush passes the engine's flushes on.
func (h *heldAfterFirstWrite) Flush() { _ = http.NewResponseController(h.ResponseWriter).Flush() }
