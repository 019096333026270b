package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/hitcheck"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// The prediction check end to end: worker 1's events stop reaching the
// router (its engine keeps serving and evicting, but every batch is lost
// on the wire, so the index still shows a prompt it evicted). Requests for
// that prompt go to worker 1 on the index's word; its engine answers with
// usage.prompt_tokens_details.cached_tokens 0 each time; the check flags
// it within a bounded number of requests and lowers its credit, shown in
// /workers and the metrics. Worker 2, which got nothing wrong, is not
// flagged.
func TestProxyFlagsAWorkerWhoseEngineStopsAgreeing(t *testing.T) {
	const bs = 16
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: bs, Routing: routing.DefaultConfig(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	var lost atomic.Bool
	var engines []*simengine.Engine
	for i := range 2 {
		opts := simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: bs, CapacityBlocks: 16}
		if i == 0 {
			opts.DropSeqs = func(uint64) bool { return lost.Load() }
		}
		eng, err := simengine.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		hs, err := eng.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{CompletionTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hs.Close() })
		engines = append(engines, eng)
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: eng.Endpoint(),
			ReplayEndpoint: eng.ReplayEndpoint(), ModelName: "m", TenantID: api.DefaultTenant, ServingEndpoint: hs.ServingEndpoint()}); err != nil {
			t.Fatal(err)
		}
	}
	prompt := make([]uint32, 16*bs) // fills worker 1's cache
	for i := range prompt {
		prompt[i] = uint32(7000 + i)
	}
	engines[0].Serve(prompt, "")
	frontendtest.Settle(t, svc, engines) // the index holds the prompt on worker 1
	p, err := New(requestpath.New(svc, requestpath.Config{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)

	lost.Store(true)
	check := func(k messages.WorkerID) *api.HitCheckInfo {
		ws, err := svc.Workers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.InstanceID == k {
				return w.Ranks[0].HitCheck
			}
		}
		return nil
	}
	body := `{"model":"m","prompt":` + tokens(7, len(prompt)) + `}` // the same ids
	flaggedAt := 0
	for i := 1; i <= hitcheck.DefaultWindow && flaggedAt == 0; i++ {
		filler := make([]uint32, 16*bs)
		for j := range filler {
			filler[j] = uint32(100000*i + j)
		}
		engines[0].Serve(filler, "") // evicts the prompt; the removals are lost
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"cached_tokens":0`) {
			t.Fatalf("request %d: %s %s (want worker 1 recomputing the evicted prompt)", i, resp.Status, b)
		}
		frontendtest.WaitFor(t, "the report checked", func() (bool, any) {
			c := check(1)
			return c != nil && c.Reports == uint64(i), c
		})
		if check(1).Flagged {
			flaggedAt = i
		}
	}
	// Judged once the predicted tokens reach the minimum (4 prompts of 256
	// tokens), flagged at once: every report missed.
	if want := int((hitcheck.DefaultMinPredicted + uint64(len(prompt)) - 1) / uint64(len(prompt))); flaggedAt != want {
		t.Fatalf("worker 1 flagged at request %d, want %d", flaggedAt, want)
	}
	c := check(1)
	if c.Credit != hitcheck.DefaultMinCredit || c.PredictedTokens != uint64(flaggedAt*len(prompt)) || c.ReportedTokens != 0 || c.WindowRatio == nil || *c.WindowRatio != 0 {
		t.Fatalf("worker 1's check %+v", c)
	}
	if c := check(2); c != nil {
		t.Fatalf("worker 2 served nothing but has a check: %+v", c)
	}
	var m strings.Builder
	if err := svc.WriteHitMetrics(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kvrouter_hit_check_flagged{worker="1",dp_rank="0"} 1`, `kvrouter_hit_check_credit{worker="1",dp_rank="0"} 0.25`,
		fmt.Sprintf("kvrouter_hit_check_error_bucket{le=\"-1\"} %d\n", flaggedAt), fmt.Sprintf("kvrouter_hit_check_error_count %d\n", flaggedAt)} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, m.String())
		}
	}
}
