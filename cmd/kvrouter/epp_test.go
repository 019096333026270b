package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/certs"
	"github.com/kvrouter/kvrouter/actors/certs/certstest"
	"github.com/kvrouter/kvrouter/actors/frontend/picker"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
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

func testService(t *testing.T) *service.Service {
	t.Helper()
	svc, err := service.New(actor.NewActorSystem(), service.Config{BlockSize: 16, Routing: routing.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// startEPP builds and starts the picker of args until the test ends.
func startEPP(t *testing.T, svc *service.Service, args ...string) (*eppFlags, eppListening, []func(io.Writer) error) {
	t.Helper()
	f := parseEPP(t, args...)
	s, _, more, err := f.build(svc, "m", 1<<20, certs.Policy{}, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	at, err := f.start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := at.stopped(); err != nil {
			t.Errorf("picker: %v", err)
		}
	})
	return f, at, more
}

func readinessServing(t *testing.T, what string, hc healthpb.HealthClient) {
	t.Helper()
	eventually.True(t, what+": readiness serving", func() (bool, string) {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: picker.HealthReadiness})
		return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING, fmt.Sprint(r.GetStatus(), err)
	})
}

// TestEPPFlags checks serve's picker flags: refusals, loopback for a bare
// port, and a picker that starts with TLS by default (dialed as the
// gateways dial it), answers its health services on the TLS port and on
// the plaintext health port, and puts its metrics, the certificate's
// among them, on /metrics.
func TestEPPFlags(t *testing.T) {
	svc := testService(t)
	for args, want := range map[string]string{
		"--epp-listen :1 --epp-body-mode sideways":                         "--epp-body-mode",
		"--epp-listen :1 --epp-fallbacks 99":                               "--epp-fallbacks",
		"--epp-listen :1 --epp-max-body -1":                                "--epp-max-body",
		"--epp-listen :1 --epp-secure-serving=false --epp-cert-dir /x":     "need --epp-secure-serving",
		"--epp-listen :1 --epp-cert-dir /nonexistent":                      "--epp-cert-dir",
		"--epp-listen :1 --epp-cert-dir /nonexistent --epp-cert-names a.b": "not with --epp-cert-dir",
		"--epp-listen :1 --epp-client-ca /nonexistent/ca.crt":              "ca.crt",
	} {
		if _, _, _, err := parseEPP(t, strings.Fields(args)...).build(svc, "m", 1<<20, certs.Policy{}, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a %s error", args, err, want)
		}
	}
	if parseEPP(t).enabled() {
		t.Error("the picker runs without --epp-listen")
	}
	if addr, err := parseEPP(t, "--epp-listen", ":9002").listenAddr(); err != nil || addr != "127.0.0.1:9002" {
		t.Errorf(":9002 listens on %q (%v), want loopback", addr, err)
	}
	for listen, want := range map[string]string{"0.0.0.0:9002": "0.0.0.0:9003", "127.0.0.1:9002": "127.0.0.1:9003"} {
		if addr, err := parseEPP(t).serving.healthAddr(listen); err != nil || addr != want {
			t.Errorf("health port of a picker on %s: %q (%v), want %s by default", listen, addr, err, want)
		}
	}

	f, at, more := startEPP(t, svc, "--epp-listen", ":0", "--epp-health-listen", "127.0.0.1:0", "--epp-fallbacks", "2",
		"--epp-body-mode", "buffered", "--epp-cert-names", "epp.example")
	if !strings.HasPrefix(at.extProc, "127.0.0.1:") || !strings.HasPrefix(at.health, "127.0.0.1:") {
		t.Errorf("listening on %s and %s, want loopback", at.extProc, at.health)
	}
	c, err := tls.Dial("tcp", at.extProc, et.GatewayTLS())
	if err != nil {
		t.Fatalf("TLS handshake as a gateway: %v", err)
	}
	cs := c.ConnectionState()
	c.Close()
	if cs.NegotiatedProtocol != "h2" || !strings.Contains(strings.Join(cs.PeerCertificates[0].DNSNames, ","), "epp.example") {
		t.Errorf("ALPN %q, names %v: want h2 and epp.example", cs.NegotiatedProtocol, cs.PeerCertificates[0].DNSNames)
	}
	readinessServing(t, "TLS port", healthpb.NewHealthClient(et.DialTLS(t, at.extProc).Conn))
	hconn, err := grpc.NewClient(at.health, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hconn.Close()
	readinessServing(t, "plaintext health port", healthpb.NewHealthClient(hconn))
	if _, err := healthpb.NewHealthClient(et.Dial(t, at.extProc).Conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a plaintext client was answered on the TLS ext_proc port")
	}
	if f.src == nil || !f.src.Current().SelfSigned {
		t.Error("no self-signed certificate without --epp-cert-dir")
	}
	var text strings.Builder
	for _, m := range append(more, tlsSources{f.src}.WriteMetrics) {
		if err := m(&text); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"kvrouter_epp_requests_total", `kvrouter_request_path_in_flight{front="epp"} 0`,
		`kvrouter_tls_reloads_total{listener="picker"} 0`, `kvrouter_tls_certificate_expiry_timestamp_seconds{listener="picker"}`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestEPPPlaintextOptOut: --epp-secure-serving=false keeps h2c on the
// ext_proc port (a TLS client fails there) and has no certificate.
func TestEPPPlaintextOptOut(t *testing.T) {
	f, at, _ := startEPP(t, testService(t), "--epp-listen", ":0", "--epp-secure-serving=false", "--epp-health-listen", "")
	if at.health != "" || at.servers != 1 {
		t.Errorf("an empty --epp-health-listen still serves a health port (%q)", at.health)
	}
	readinessServing(t, "h2c port", healthpb.NewHealthClient(et.Dial(t, at.extProc).Conn))
	if c, err := tls.Dial("tcp", at.extProc, et.GatewayTLS()); err == nil {
		c.Close()
		t.Error("a TLS handshake succeeded on the h2c port")
	}
	if f.src != nil {
		t.Error("a plaintext picker has a certificate")
	}
}

// TestEPPCertDirAndClientCA: a certificate directory is served (its
// serial), and with --epp-client-ca a gateway without a client certificate
// from the CA is refused while one with it is answered.
func TestEPPCertDirAndClientCA(t *testing.T) {
	ca := certstest.NewCA(t, "gateway-ca")
	pair := ca.Server()
	dir := certstest.Dir(t, pair, nil)
	caFile := dir + "/client-ca.crt"
	certstest.WriteFile(t, caFile, ca.PEM)
	_, at, _ := startEPP(t, testService(t), "--epp-listen", ":0", "--epp-health-listen", "", "--epp-cert-dir", dir, "--epp-client-ca", caFile)
	if _, err := healthpb.NewHealthClient(et.DialTLS(t, at.extProc).Conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a gateway without a client certificate was answered")
	}
	client := ca.Client()
	kp, err := tls.X509KeyPair(client.Cert, client.Key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := et.GatewayTLS()
	cfg.Certificates = []tls.Certificate{kp}
	c, err := tls.Dial("tcp", at.extProc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(pair.Serial) != 0 {
		t.Errorf("served serial %v, want the directory's %v", got, pair.Serial)
	}
}
