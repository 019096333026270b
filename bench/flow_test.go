package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/bench/loadgen"
)

// BenchmarkFlowControlOverload offers twice a small fleet's capacity
// through kvrouter's proxy, open loop, in two priority bands and three
// tenants, with flow control and with the immediate 429 it replaces.
// Four simulated engines answer 8 streamed tokens 10 ms apart (a request
// takes about 70 ms); a worker has no room past 10 booked blocks
// (--proxy-shed-above-blocks 10: three 64-token requests at once), so the
// fleet serves about 12 requests at a time, about 170/s. Offered: 340/s
// for flowLoadedFor, a third "critical" (priority 10), two thirds
// "batch" (0); each band's requests rotate over tenants a, b, c (their
// fairness ids). Flow control's TTL is 1 s, so what cannot be served in
// time is shed. "flow_headroom" keeps 4 blocks (one request) free on
// every worker for the critical band (FlowConfig.Headroom), "_headroom8"
// two requests; "flow_reserveN" keeps room on N workers of the fleet
// (FlowConfig.ReserveWorkers). The "crit10" rows offer the same 340/s
// with one request in ten critical (a fifth of the fleet's capacity
// instead of two thirds). The "unloaded" row sends critical requests
// alone at 20/s for flowUnloadedFor. Metrics per band: TTFT p50/p99 of
// the served (from the scheduled send), the share served; per tenant of
// the batch band, the share served; the share of each band that waited
// in the queue; goodput.
func BenchmarkFlowControlOverload(b *testing.B) {
	type run struct {
		name     string
		rate     int
		flow     bool
		critical int // one request in critical is in the critical band (1: all)
		headroom uint64
		reserve  int
	}
	for _, c := range []run{{name: "unloaded", rate: 20, flow: true, critical: 1},
		{name: "flow", rate: 340, flow: true, critical: 3}, {name: "flow_headroom", rate: 340, flow: true, critical: 3, headroom: 4},
		{name: "flow_headroom8", rate: 340, flow: true, critical: 3, headroom: 8},
		{name: "flow_reserve1", rate: 340, flow: true, critical: 3, reserve: 1}, {name: "flow_reserve2", rate: 340, flow: true, critical: 3, reserve: 2},
		{name: "flow_reserve3", rate: 340, flow: true, critical: 3, reserve: 3},
		{name: "immediate429", rate: 340, critical: 3},
		{name: "crit10_flow", rate: 340, flow: true, critical: 10}, {name: "crit10_flow_headroom", rate: 340, flow: true, critical: 10, headroom: 4},
		{name: "crit10_flow_reserve1", rate: 340, flow: true, critical: 10, reserve: 1}, {name: "crit10_flow_reserve2", rate: 340, flow: true, critical: 10, reserve: 2},
		{name: "crit10_immediate429", rate: 340, critical: 10}} {
		b.Run(c.name, func(b *testing.B) {
			var r flowResult
			for range b.N {
				r = flowRun(b, c.rate, c.flow, c.critical, c.headroom, c.reserve)
			}
			for _, band := range []string{"critical", "batch"} {
				if len(r.sent[band]) == 0 {
					continue
				}
				l := loadgen.Summarize(r.ttft[band])
				b.ReportMetric(l.P50/1000, band+"_ttft_p50_ms")
				b.ReportMetric(l.P99/1000, band+"_ttft_p99_ms")
				b.ReportMetric(float64(len(r.ttft[band]))/float64(len(r.sent[band])), band+"_served")
				b.ReportMetric(float64(r.queued[band])/float64(len(r.sent[band])), band+"_queued")
			}
			if c.critical > 1 {
				for _, t := range []string{"a", "b", "c"} {
					b.ReportMetric(float64(r.tenantServed[t])/float64(r.tenantSent[t]), "batch_"+t+"_served")
				}
			}
			b.ReportMetric(r.goodput, "goodput/s")
		})
	}
}

type flowResult struct {
	sent                     map[string][]int // band → request numbers
	ttft                     map[string][]time.Duration
	tenantSent, tenantServed map[string]int   // batch band, by tenant
	queued                   map[string]int64 // band → requests that waited in the flow-control queue
	goodput                  float64
}

// How long the loaded and the unloaded runs offer their load: long
// enough that a p99 is not the largest of a few dozen samples (300
// unloaded, 680 critical at a third, 204 at one in ten).
const (
	flowLoadedFor   = 6 * time.Second
	flowUnloadedFor = 15 * time.Second
)

func flowRun(b *testing.B, rate int, flow bool, critical int, headroom uint64, reserve int) flowResult {
	b.Helper()
	gc := requestpath.GuardConfig{}
	if flow {
		gc.Flow = &requestpath.FlowConfig{TTL: time.Second, Objectives: map[string]int{"critical": 10, "batch": 0}, Headroom: headroom, ReserveWorkers: reserve}
	}
	g, err := requestpath.NewGuard(gc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go g.Run(ctx, 100*time.Millisecond)
	url := guardFleet(b, 4, func(int) string { return "" }, requestpath.Config{ShedAboveBlocks: 10, Guard: g}, 3)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	out := flowResult{sent: map[string][]int{}, ttft: map[string][]time.Duration{}, tenantSent: map[string]int{}, tenantServed: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := rate * int(flowLoadedFor/time.Second)
	if critical == 1 {
		n = rate * int(flowUnloadedFor/time.Second)
	}
	gap := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * gap)
		if w := time.Until(due); w > 0 {
			time.Sleep(w) // pacing the open loop, not waiting for an effect
		}
		band := "critical"
		if i%critical != 0 {
			band = "batch"
		}
		tenant := []string{"a", "b", "c"}[len(out.sent[band])%3] // each tenant sends a third of each band
		out.sent[band] = append(out.sent[band], i)
		if band == "batch" {
			out.tenantSent[tenant]++
		}
		body := fmt.Sprintf(`{"model":"m","stream":true,"prompt":%s}`, benchPrompt(100000+i))
		wg.Go(func() {
			ttft, ok := flowRequest(client, url, body, band, tenant, due)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				return
			}
			out.ttft[band] = append(out.ttft[band], ttft)
			if band == "batch" {
				out.tenantServed[tenant]++
			}
		})
	}
	wg.Wait()
	out.queued = map[string]int64{"critical": g.FlowCount(10, requestpath.FlowQueued), "batch": g.FlowCount(0, requestpath.FlowQueued)}
	served := len(out.ttft["critical"]) + len(out.ttft["batch"])
	out.goodput = float64(served) / time.Since(start).Seconds()
	return out
}

// flowRequest posts one streamed completion with its objective and
// fairness id and reads it whole: the time from due (its scheduled send)
// to its first byte, ok for a 200 read to its end.
func flowRequest(client *http.Client, base, body, objective, tenant string, due time.Time) (time.Duration, bool) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return 0, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-gateway-inference-objective", objective)
	req.Header.Set("x-gateway-inference-fairness-id", tenant)
	resp, err := client.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, false
	}
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, false
	}
	ttft := time.Since(due)
	_, err = io.Copy(io.Discard, resp.Body)
	return ttft, err == nil
}
