package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// routeFixture is a served kvrouter whose index learned from 4 simulated
// engines that served the first 2,000 Mooncake prompts.
type routeFixture struct {
	svc     *service.Service
	url     string
	prompts [][]uint32
	engines []*simengine.Engine
}

func newRouteFixture(b *testing.B) *routeFixture { return newShardedRouteFixture(b, 1) }

// newShardedRouteFixture is newRouteFixture with the index in shards
// shard actors.
func newShardedRouteFixture(b *testing.B, shards int) *routeFixture {
	drv, err := simengine.OpenTrace(tracePath, simengine.TraceConfig{TokensPerBlock: 16, Limit: 2000})
	if err != nil {
		b.Fatal(err)
	}
	defer drv.Close()
	var prompts [][]uint32
	for {
		p, err := drv.Next()
		if err != nil {
			break
		}
		prompts = append(prompts, p.Tokens)
	}
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig(), Timeout: time.Second,
		Pipeline: pipeline.Config{Index: indexer.Config{Shards: shards}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{}))
	b.Cleanup(srv.Close)
	var engines []*simengine.Engine
	for i := 0; i < 4; i++ {
		e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: 16, CapacityBlocks: 1 << 16})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		engines = append(engines, e)
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: e.Endpoint(),
			ReplayEndpoint: e.ReplayEndpoint(), ModelName: "m", BlockSize: 16,
			ServingEndpoint: fmt.Sprintf("127.0.0.%d:8000", i+1)}); err != nil { // where the endpoint picker sends requests
			b.Fatal(err)
		}
	}
	for i, p := range prompts {
		engines[i%4].Serve(p, "")
	}
	// Let the index catch up: a query of the last prompt finds it.
	eventually.True(b, "the index caught up", func() (bool, string) {
		q, err := svc.Query(context.Background(), api.QueryRequest{TokenIDs: prompts[len(prompts)-1], ModelName: "m"})
		return err == nil && len(q.Scores) > 0, fmt.Sprint(q, err)
	})
	return &routeFixture{svc: svc, url: srv.URL, prompts: prompts, engines: engines}
}

// BenchmarkRoute measures /route latency (p50/p99) with the trace's prompts
// against an index of ~2,000 prompts on 4 workers, scored with the
// default cost: in process (the service call: hashing, index shard, route
// actor) and over HTTP (one keep-alive client, JSON both ways). Requests
// are freed as they go, so load stays low. goroutines/op counts the
// goroutines started per route and free: protoactor's default dispatcher
// starts one per mailbox run of an idle actor; the index shards' parked
// workers start none.
func BenchmarkRoute(b *testing.B) {
	f := newRouteFixture(b)
	b.Run("in-process", func(b *testing.B) { benchRouteInProcess(b, f) })
	b.Run("http", func(b *testing.B) {
		client := &http.Client{}
		lat := make([]time.Duration, 0, b.N)
		for i := 0; b.Loop(); i++ {
			body, _ := json.Marshal(map[string]any{"token_ids": f.prompts[i%len(f.prompts)], "model_name": "m", "request_id": fmt.Sprint("h", i)})
			t0 := time.Now()
			resp, err := client.Post(f.url+"/route", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
			_ = f.svc.Free(context.Background(), fmt.Sprint("h", i))
		}
		reportLatency(b, lat)
	})
}

// BenchmarkRouteShards is BenchmarkRoute/in-process with the index in 1,
// 2 and 4 shard actors.
func BenchmarkRouteShards(b *testing.B) {
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) { benchRouteInProcess(b, newShardedRouteFixture(b, n)) })
	}
}

func benchRouteInProcess(b *testing.B, f *routeFixture) {
	lat := make([]time.Duration, 0, b.N)
	created := goroutinesCreated()
	for i := 0; b.Loop(); i++ {
		p := f.prompts[i%len(f.prompts)]
		t0 := time.Now()
		if _, err := f.svc.Route(context.Background(), api.RouteRequest{TokenIDs: p, ModelName: "m", RequestID: fmt.Sprint("a", i)}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		_ = f.svc.Free(context.Background(), fmt.Sprint("a", i))
	}
	b.ReportMetric(float64(goroutinesCreated()-created)/float64(len(lat)), "goroutines/op")
	reportLatency(b, lat)
}

// goroutinesCreated is the process's count of goroutines ever started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
