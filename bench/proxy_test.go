package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/loadgen"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
)

// BenchmarkProxyAddedLatency measures what kvrouter's OpenAI proxy adds
// to a streamed request: one simulated engine with an OpenAI surface
// (4 streamed tokens, no pause), requests of a distinct 64-token prompt
// each sent open-loop at a fixed rate (1,000 and 5,000 per second, one
// second each), to three targets in the same run —
//
//	direct        the engine itself
//	reverseproxy  net/http/httputil.ReverseProxy forwarding to it (the floor
//	              for a Go proxy)
//	kvrouter      the proxy: route (index lookup, booking), forward, stream,
//	              prefill_done and free
//
// Latencies are measured from each request's scheduled send time (a late
// send counts against the target), to the first answer byte (ttft) and to
// the end of the answer (e2e). Metrics: ttft/e2e p50 and p99 in µs, and the
// rate achieved.
func BenchmarkProxyAddedLatency(b *testing.B) {
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: 16, CapacityBlocks: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	hs, err := eng.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{CompletionTokens: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer hs.Close()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig(), Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	if err := svc.Register(context.Background(), api.Registration{InstanceID: 1, Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(),
		ModelName: "m", TenantID: api.DefaultTenant, ServingEndpoint: hs.ServingEndpoint()}); err != nil {
		b.Fatal(err)
	}
	px, err := proxy.New(requestpath.New(svc, requestpath.Config{}), proxy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	kv := httptest.NewServer(px)
	defer kv.Close()
	engineURL, _ := url.Parse("http://" + hs.ServingEndpoint())
	rp := httputil.NewSingleHostReverseProxy(engineURL)
	rp.FlushInterval = -1                                                           // flush every write, as the kvrouter proxy does
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 1024} // the kvrouter proxy's defaults
	floor := httptest.NewServer(rp)
	defer floor.Close()
	targets := []struct{ name, url string }{{"direct", engineURL.String()}, {"reverseproxy", floor.URL}, {"kvrouter", kv.URL}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}}
	seq := 0
	for _, rate := range []int{1000, 5000} {
		for _, t := range targets {
			b.Run(fmt.Sprintf("rate=%d/%s", rate, t.name), func(b *testing.B) {
				var r openLoopResult
				for range b.N {
					r = openLoop(client, t.url, rate, time.Second, &seq)
				}
				if r.errors > 0 {
					b.Errorf("%d requests failed (first: %v)", r.errors, r.firstErr)
				}
				ttft, e2e := loadgen.Summarize(r.ttft), loadgen.Summarize(r.e2e)
				b.ReportMetric(ttft.P50, "ttft_p50_us")
				b.ReportMetric(ttft.P99, "ttft_p99_us")
				b.ReportMetric(e2e.P50, "e2e_p50_us")
				b.ReportMetric(e2e.P99, "e2e_p99_us")
				b.ReportMetric(r.achieved, "req/s")
			})
		}
	}
}

type openLoopResult struct {
	ttft, e2e []time.Duration
	errors    int
	firstErr  error
	achieved  float64
}

// openLoop sends rate requests per second for d to base's /v1/completions,
// each on its own goroutine at its scheduled time, and waits for all.
func openLoop(client *http.Client, base string, rate int, d time.Duration, seq *int) openLoopResult {
	n := int(float64(rate) * d.Seconds())
	gap := time.Second / time.Duration(rate)
	var (
		mu  sync.Mutex
		out openLoopResult
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * gap)
		if w := time.Until(due); w > 0 {
			time.Sleep(w) // pacing the open loop, not waiting for an effect
		}
		*seq++
		body := fmt.Sprintf(`{"model":"m","stream":true,"prompt":%s}`, benchPrompt(*seq))
		wg.Go(func() {
			ttft, e2e, err := streamedRequest(client, base, body)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if out.errors++; out.firstErr == nil {
					out.firstErr = err
				}
				return
			}
			late := time.Since(due) - e2e // time between the due time and the send
			out.ttft = append(out.ttft, ttft+late)
			out.e2e = append(out.e2e, e2e+late)
		})
	}
	wg.Wait()
	out.achieved = float64(n) / time.Since(start).Seconds()
	return out
}

// benchPrompt is a distinct 64-token prompt per request.
func benchPrompt(seq int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range 64 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprint(&sb, seq*64+i)
	}
	sb.WriteByte(']')
	return sb.String()
}

// streamedRequest posts one streamed completion and reads it whole.
func streamedRequest(client *http.Client, base, body string) (ttft, e2e time.Duration, err error) {
	t0 := time.Now()
	resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %s", resp.Status)
	}
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, 0, err
	}
	ttft = time.Since(t0)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, err
	}
	return ttft, time.Since(t0), nil
}
