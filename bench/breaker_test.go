package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/bench/loadgen"
)

// BenchmarkBreakerFailFastShare measures the share of requests a
// fast-failing engine receives in a fleet of 16, through kvrouter's proxy
// with the default routing cost, with and without circuit breakers.
// Fifteen simulated engines answer 8 streamed tokens 10 ms apart (a
// request stays booked about 70 ms); worker 1 answers 503 at once to
// everything, so it never holds a booking and its booked load stays 0 —
// the most attractive rank to a load-aware cost (it also wins the ties:
// the lowest worker id). Requests: distinct 64-token prompts (no cache
// affinity), open loop for 3 s at 200/s (about 14 in flight: most engines
// idle at any moment) and 600/s (about 42: every healthy engine busy, the
// sick one the least loaded); with retries (3 attempts, the default
// budget and backoff) and without (1 attempt: the 503 goes to the client,
// as behind a picker whose data plane does not retry). Metrics: the share
// of requests the sick engine received, the share the clients saw fail
// (a 503 passed through once no retry was left), and the clients' time to
// first token (a retry costs a round trip and a backoff).
func BenchmarkBreakerFailFastShare(b *testing.B) {
	for _, c := range []struct {
		rate, attempts int
		breakers       bool
	}{{200, 3, false}, {200, 3, true}, {600, 3, false}, {600, 3, true}, {600, 1, false}, {600, 1, true}} {
		b.Run(fmt.Sprintf("rate=%d/attempts=%d/breakers=%v", c.rate, c.attempts, c.breakers), func(b *testing.B) {
			var sick, sent int64
			var r openLoopResult
			for range b.N {
				var s, n int64
				s, n, r = failFastRun(b, c.rate, c.attempts, c.breakers)
				sick, sent = sick+s, sent+n
			}
			ttft := loadgen.Summarize(r.ttft)
			b.ReportMetric(float64(sick)/float64(sent), "sick_share")
			b.ReportMetric(float64(r.errors)/float64(len(r.ttft)+r.errors), "failed_share")
			b.ReportMetric(ttft.P50, "ttft_p50_us")
			b.ReportMetric(ttft.P99, "ttft_p99_us")
		})
	}
}

// failFastRun is one run: requests the sick engine received, requests
// sent, and the clients' results.
func failFastRun(b *testing.B, rate, attempts int, breakers bool) (sick, sent int64, r openLoopResult) {
	b.Helper()
	var hits atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "engine failing", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	g, err := requestpath.NewGuard(requestpath.GuardConfig{BreakerOff: !breakers})
	if err != nil {
		b.Fatal(err)
	}
	url := guardFleet(b, 16, func(i int) string {
		if i == 0 { // worker 1 is the sick one: it also wins the cost's ties
			return strings.TrimPrefix(bad.URL, "http://")
		}
		return ""
	}, requestpath.Config{MaxCandidates: 3, Guard: g}, attempts)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	seq := 0
	r = openLoop(client, url, rate, 3*time.Second, &seq)
	return hits.Load(), int64(seq), r
}
