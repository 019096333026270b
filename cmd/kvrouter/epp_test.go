package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/picker"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func parseEPP(t *testing.T, args ...string) *eppFlags {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addEPPFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestEPPFlags checks serve's picker flags: refusals, loopback for a bare
// port, and a picker that starts, answers its health services and puts its
// metrics on /metrics.
func TestEPPFlags(t *testing.T) {
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	for args, want := range map[string]string{
		"--epp-listen :1 --epp-body-mode sideways": "--epp-body-mode",
		"--epp-listen :1 --epp-fallbacks 99":       "--epp-fallbacks",
		"--epp-listen :1 --epp-max-body -1":        "--epp-max-body",
	} {
		if _, _, err := parseEPP(t, strings.Fields(args)...).build(svc, "m", 1<<20, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a %s error", args, err, want)
		}
	}
	if parseEPP(t).enabled() {
		t.Error("the picker runs without --epp-listen")
	}
	if addr, err := parseEPP(t, "--epp-listen", ":9002").listenAddr(); err != nil || addr != "127.0.0.1:9002" {
		t.Errorf(":9002 listens on %q (%v), want loopback", addr, err)
	}
	f := parseEPP(t, "--epp-listen", ":0", "--epp-fallbacks", "2", "--epp-body-mode", "buffered")
	s, more, err := f.build(svc, "m", 1<<20, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	at, errc, err := f.start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	if !strings.HasPrefix(at, "127.0.0.1:") {
		t.Errorf("listening on %s, want loopback", at)
	}
	conn, err := grpc.NewClient(at, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	eventually.True(t, "readiness serving", func() (bool, string) {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: picker.HealthReadiness})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING, fmt.Sprint(r.GetStatus(), err)
	})
	var text strings.Builder
	for _, m := range more {
		if err := m(&text); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"kvrouter_epp_requests_total", `kvrouter_request_path_in_flight{front="epp"} 0`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
