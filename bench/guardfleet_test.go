package bench

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// guardFleet is the router (default cost) with n workers and kvrouter's
// proxy over it (attempts workers tried per request, pc its request
// path); it returns the proxy's URL, everything closed when the benchmark
// ends. Worker i+1 serves at serving(i), or, when that is "", is a
// simulated engine streaming 8 tokens 10 ms apart (about 70 ms a request).
func guardFleet(b *testing.B, n int, serving func(i int) string, pc requestpath.Config, attempts int) string {
	b.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig(), Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	for i := range n {
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 16, CapacityBlocks: 1 << 14})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { eng.Close() })
		at := serving(i)
		if at == "" {
			hs, err := eng.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{CompletionTokens: 8, TokenInterval: 10 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { hs.Close() })
			at = hs.ServingEndpoint()
		}
		if err := svc.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: eng.Endpoint(),
			ModelName: "m", TenantID: api.DefaultTenant, ServingEndpoint: at}); err != nil {
			b.Fatal(err)
		}
	}
	px, err := proxy.New(requestpath.New(svc, pc), proxy.Options{Attempts: attempts, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	kv := httptest.NewServer(px)
	b.Cleanup(kv.Close)
	return kv.URL
}
