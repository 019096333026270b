package service

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// The engine's own prefix-cache counters reach the router's /metrics as
// the engine reports them: the figures the routing dashboard sets beside
// the predicted hit ratio.
func TestEnginePrefixCountersOnMetrics(t *testing.T) {
	s := newSignalled(t, 1)
	s.direct(0, 2) // the same prompt twice: queried twice, the second time partly cached
	engine := func() (queries, hits float64) {
		resp, err := http.Get("http://" + s.servers[0].ServingEndpoint() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		fams := metricstest.Parse(t, resp.Body)
		queries, _ = metricstest.Sample(fams, "vllm:prefix_cache_queries_total", nil)
		hits, _ = metricstest.Sample(fams, "vllm:prefix_cache_hits_total", nil)
		return queries, hits
	}
	eventually.True(t, "the engine's prefix-cache counters relayed", func() (bool, string) {
		q, h := engine()
		var b strings.Builder
		if err := s.svc.WriteSignalMetrics(&b); err != nil {
			return false, err.Error()
		}
		fams := metricstest.Parse(t, strings.NewReader(b.String()))
		lbl := func(kind string) map[string]string {
			return map[string]string{"worker": "1", "dp_rank": "0", "kind": kind}
		}
		gq, okQ := metricstest.Sample(fams, "kvrouter_engine_reported_prefix_cache_tokens_total", lbl("queries"))
		gh, okH := metricstest.Sample(fams, "kvrouter_engine_reported_prefix_cache_tokens_total", lbl("hits"))
		return q == 16 && okQ && okH && gq == q && gh == h,
			fmt.Sprintf("engine queries %v hits %v; relayed %v (%v) %v (%v)", q, h, gq, okQ, gh, okH)
	})
}
