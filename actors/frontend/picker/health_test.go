package picker

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthPort serves s's plaintext health port until the test ends and
// returns a client of it.
func healthPort(t *testing.T, s *Server) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeHealth(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHealth: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// healthIs waits until every service in names answers st on hc.
func healthIs(t *testing.T, hc healthpb.HealthClient, st healthpb.HealthCheckResponse_ServingStatus, names ...string) {
	t.Helper()
	for _, svc := range names {
		waitFor(t, fmt.Sprintf("%q %s", svc, st), func() (bool, any) {
			r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
			return err == nil && r.GetStatus() == st, fmt.Sprint(r.GetStatus(), err)
		})
	}
}

var readyNames = []string{"", "readiness", "inference-extension", "envoy.service.ext_proc.v3.ExternalProcessor"}

// TestHealthPort: the plaintext health port answers every service name —
// NOT_SERVING until the router is ready (kvrouter serve: its index synced),
// SERVING after, and back when it is not — as the TLS ext_proc port does.
func TestHealthPort(t *testing.T) {
	var ready atomic.Bool
	cfg := Config{ReadyEvery: 5 * time.Millisecond, Ready: func(context.Context) error {
		if ready.Load() {
			return nil
		}
		return fmt.Errorf("index not synced")
	}}
	s, envoy := startPicker(t, newFakeCore(), cfg)
	hc := healthPort(t, s)
	onTLS := healthpb.NewHealthClient(envoy.Conn)
	healthIs(t, hc, healthpb.HealthCheckResponse_SERVING, HealthLiveness)
	healthIs(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, readyNames...)
	ready.Store(true)
	healthIs(t, hc, healthpb.HealthCheckResponse_SERVING, readyNames...)
	healthIs(t, onTLS, healthpb.HealthCheckResponse_SERVING, readyNames...)
	ready.Store(false)
	healthIs(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, readyNames...)
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "something-else"}); err == nil {
		t.Fatal("an unknown service answered")
	}
}

// TestDrainKeepsServing: once draining, readiness is NOT_SERVING for good
// while an open stream completes and a new one is still served; when the
// deadline comes (Serve's context ends) a stream still open is cut and its
// booking freed.
func TestDrainKeepsServing(t *testing.T) {
	core := newFakeCore("a:1")
	src := selfSigned(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(core, Config{ReadyEvery: 5 * time.Millisecond, TLS: src})
	ctx, deadline := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()
	defer deadline()
	hc := healthPort(t, s)
	envoy := et.DialTLS(t, lis.Addr().String())
	healthIs(t, hc, healthpb.HealthCheckResponse_SERVING, readyNames...)

	open := envoy.Open()
	open.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil), et.RequestBody(tokenBody, true))
	open.Expect("req_headers dest=a:1 len="+fmt.Sprint(len(tokenBody))+" clear meta=a:1", "req_body streamed="+fmt.Sprint(len(tokenBody))+" eos")

	s.Drain() // SIGTERM
	healthIs(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, readyNames...)
	healthIs(t, hc, healthpb.HealthCheckResponse_SERVING, HealthLiveness)
	// The open stream completes.
	open.Send(et.ResponseHeaders("200", "a:1", false), et.ResponseBody("x", true, "a:1"))
	open.Expect("resp_headers", "resp_body streamed=1 eos")
	open.Finish()
	// A new one is still served, and left open at the deadline.
	late := envoy.Open()
	late.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil), et.RequestBody(tokenBody, true))
	late.Expect("req_headers dest=a:1 len="+fmt.Sprint(len(tokenBody))+" clear meta=a:1", "req_body streamed="+fmt.Sprint(len(tokenBody))+" eos")
	// Readiness does not come back, however ready the router is.
	healthIs(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, readyNames...)

	deadline()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	// Serve returns once the cut stream's handler has freed its booking.
	if _, booked := core.snapshot(); booked != 0 {
		t.Fatalf("%d requests still booked when Serve returned", booked)
	}
	callsAre(t, core, "pick a:1", "served a:1", "first_byte", "done", "pick a:1", "done")
	late.Cancel()
}
