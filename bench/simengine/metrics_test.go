package simengine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// Each dialect's /metrics reads, through kvrouter's extractor with the
// dialect's engine, as the engine's own state: one request running and
// holding its blocks, one waiting for the only slot, the prefix tokens
// queried and hit so far.
func TestMetricsReportTheEngineState(t *testing.T) {
	for _, c := range []struct {
		dialect, engine, kvName string
	}{
		{MetricsVLLM, enginesignals.VLLM, "vllm:kv_cache_usage_perc"},
		{MetricsVLLMOld, enginesignals.VLLM, "vllm:gpu_cache_usage_perc"},
		{MetricsSGLang, enginesignals.SGLang, "sglang:token_usage"},
		{MetricsSGLangV2, enginesignals.SGLang, "sglang_token_usage"},
	} {
		t.Run(c.dialect, func(t *testing.T) {
			eng, err := New(Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 10, DpRank: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			release := make(chan struct{})
			srv, err := eng.ServeHTTP("127.0.0.1:0", HTTPOptions{CompletionTokens: 2, Metrics: c.dialect, MaxRunning: 1,
				Hold: func(ctx context.Context) {
					select {
					case <-release:
					case <-ctx.Done():
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			base := "http://" + srv.ServingEndpoint()
			scrape := func() (enginesignals.Signals, error) {
				resp, err := http.Get(base + "/metrics")
				if err != nil {
					return enginesignals.Signals{}, err
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return enginesignals.Signals{}, fmt.Errorf("/metrics: %s", resp.Status)
				}
				body, _ := io.ReadAll(resp.Body)
				var x enginesignals.Extractor
				return x.Extract(body, c.engine, 1)
			}
			// Two streamed requests of 8 tokens (2 blocks): one runs and
			// holds, the other waits for the slot.
			done := make(chan error, 2)
			for range 2 {
				go func() {
					resp, err := http.Post(base+"/v1/completions", "application/json",
						strings.NewReader(`{"model":"m","prompt":[1,2,3,4,5,6,7,8],"stream":true}`))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					done <- err
				}()
			}
			var sig enginesignals.Signals
			eventually.True(t, "one running, one waiting", func() (bool, string) {
				sig, err = scrape()
				return err == nil && sig.Running == 1 && sig.Waiting == 1, fmt.Sprintf("%+v %v", sig, err)
			})
			if sig.KVUsage != 0.2 || sig.KVUsageName != c.kvName || sig.BlockSize != 4 || sig.TotalBlocks != 10 {
				t.Fatalf("running state %+v", sig)
			}
			close(release)
			for range 2 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			sig, err = scrape()
			if err != nil || sig.Running != 0 || sig.Waiting != 0 || sig.KVUsage != 0 {
				t.Fatalf("idle state %+v %v", sig, err)
			}
			if c.engine == enginesignals.VLLM && (sig.PrefixQueries != 16 || sig.PrefixHits != 8) {
				t.Fatalf("prefix counters %+v: want 16 tokens queried, the second request's 8 hit", sig)
			}
			srv.StopMetrics(true)
			if _, err := scrape(); err == nil || !strings.Contains(err.Error(), "503") {
				t.Fatal("stopped metrics still read")
			}
		})
	}
}
