package picker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/actors/certs"
	"github.com/kvrouter/kvrouter/actors/certs/certstest"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// selfSigned is the picker's TLS with an in-memory certificate, as kvrouter
// serve runs it without a certificate directory.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	src, err := certs.NewSource(certs.SourceConfig{Name: "picker"})
	if err != nil {
		t.Fatal(err)
	}
	return certs.ServerConfig(src, certs.Policy{}, []string{"h2"})
}

// handshake dials addr with TLS as a gateway does and returns what was
// negotiated.
func handshake(t *testing.T, addr string, cfg *tls.Config) tls.ConnectionState {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState()
}

func TestTLSAsTheGatewaysDial(t *testing.T) {
	_, addr := servePicker(t, newFakeCore("a:1"), Config{TLS: selfSigned(t)})
	cs := handshake(t, addr, et.GatewayTLS())
	if cs.NegotiatedProtocol != "h2" {
		t.Fatalf("ALPN %q, want h2", cs.NegotiatedProtocol)
	}
	if cs.Version < tls.VersionTLS12 {
		t.Fatalf("TLS version %x", cs.Version)
	}
	if leaf := cs.PeerCertificates[0]; !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Fatalf("the certificate's usages %v lack ServerAuth", leaf.ExtKeyUsage)
	}
	// A plaintext (h2c) client gets no answer from the TLS port.
	plain := et.Dial(t, addr)
	if _, err := healthpb.NewHealthClient(plain.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("a plaintext client was answered on the TLS port")
	}
	// The gateways' TLS client is.
	envoy := et.DialTLS(t, addr)
	if _, err := healthpb.NewHealthClient(envoy.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: HealthLiveness}); err != nil {
		t.Fatal(err)
	}
	// The plaintext opt-out (--epp-secure-serving=false) serves h2c.
	_, plainAddr := servePicker(t, newFakeCore("a:1"), Config{})
	if _, err := healthpb.NewHealthClient(et.Dial(t, plainAddr).Conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: HealthLiveness}); err != nil {
		t.Fatalf("h2c: %v", err)
	}
}

// TestCertificateRotation: rewriting the directory's files gives new
// connections the new certificate while a stream open on an old
// connection goes on; a corrupt pair keeps the current one and is counted.
func TestCertificateRotation(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	first, second := ca.Server(), ca.Server()
	dir := certstest.Dir(t, first, nil)
	src, err := certs.NewSource(certs.SourceConfig{Name: "picker", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	core := newFakeCore("a:1")
	_, addr := servePicker(t, core, Config{TLS: certs.ServerConfig(src, certs.Policy{}, []string{"h2"})})
	serial := func() string { return handshake(t, addr, et.GatewayTLS()).PeerCertificates[0].SerialNumber.String() }
	if got := serial(); got != first.Serial.String() {
		t.Fatalf("serial %s, want %s", got, first.Serial)
	}
	envoy := et.DialTLS(t, addr)
	h := envoy.Open()
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil), et.RequestBody(tokenBody, true))
	n := fmt.Sprint(len(tokenBody))
	h.Expect("req_headers dest=a:1 len="+n+" clear meta=a:1", "req_body streamed="+n+" eos")

	certstest.Write(t, dir, second, nil)
	if changed, err := src.Check(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if got := serial(); got != second.Serial.String() {
		t.Fatalf("a new connection sees %s, want the new %s", got, second.Serial)
	}
	// The stream opened before the rotation goes on.
	h.Send(et.ResponseHeaders("200", "a:1", false), et.ResponseBody("x", true, "a:1"))
	h.Expect("resp_headers", "resp_body streamed=1 eos")
	h.Finish()
	callsAre(t, core, "pick a:1", "served a:1", "first_byte", "done")

	certstest.WriteFile(t, filepath.Join(dir, certs.CertFile), []byte("-----BEGIN CERTIFICATE-----\nbroken\n"))
	if _, err := src.Check(); err == nil {
		t.Fatal("a corrupt certificate was accepted")
	}
	if got := serial(); got != second.Serial.String() || src.Failures() != 1 {
		t.Fatalf("after a corrupt pair: serial %s (want %s), failures %d", got, second.Serial, src.Failures())
	}
}

func TestClientCertificatesFromTheCA(t *testing.T) {
	ca, rogue := certstest.NewCA(t, "clients"), certstest.NewCA(t, "rogue")
	src, err := certs.NewSource(certs.SourceConfig{Name: "picker", Dir: certstest.Dir(t, ca.Server(), ca.PEM), CA: true})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := servePicker(t, newFakeCore("a:1"), Config{TLS: certs.ServerConfig(src, certs.Policy{}, []string{"h2"})})
	check := func(client *certstest.Pair) error {
		cfg := et.GatewayTLS()
		if client != nil {
			pair, err := tls.X509KeyPair(client.Cert, client.Key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		e := et.DialWith(t, addr, credentials.NewTLS(cfg))
		_, err := healthpb.NewHealthClient(e.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: HealthLiveness})
		return err
	}
	if err := check(nil); err == nil {
		t.Error("a client without a certificate was answered")
	}
	bad := rogue.Client()
	if err := check(&bad); err == nil {
		t.Error("a client with another CA's certificate was answered")
	}
	good := ca.Client()
	if err := check(&good); err != nil {
		t.Errorf("a client with the CA's certificate: %v", err)
	}
}

// TestConformanceHooks: with the hooks on, the selection header restricts
// the choice (a bare IP allows every port of it) and the served endpoint
// comes back in the response header; off, both are ignored.
func TestConformanceHooks(t *testing.T) {
	n := fmt.Sprint(len(tokenBody))
	for _, tc := range []struct {
		hooks     bool
		sel, want string
	}{
		{true, "10.0.0.2:8000", "10.0.0.2:8000"},
		{true, "10.0.0.9, 10.0.0.2", "10.0.0.2:8000"}, // a bare IP: any of its ports
		{false, "10.0.0.2:8000", "10.0.0.1:8000"},
	} {
		core := newFakeCore("10.0.0.1:8000", "10.0.0.2:8000")
		_, envoy := startPicker(t, core, Config{Stream: StreamConfig{ConformanceHooks: tc.hooks}})
		h := envoy.Open()
		h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil, SelectionHeader, tc.sel), et.RequestBody(tokenBody, true))
		h.Expect("req_headers dest="+tc.want+" len="+n+" clear meta="+tc.want, "req_body streamed="+n+" eos")
		h.Send(et.ResponseHeaders("200", tc.want, false))
		echo := ""
		if tc.hooks {
			echo = " " + ServedEndpointHeader + "=" + tc.want
		}
		h.Expect("resp_headers" + echo)
		h.Send(et.ResponseBody("x", true, tc.want))
		h.Expect("resp_body streamed=1 eos")
		h.Finish()
	}
	// A selection none of the endpoints is in: 503, as an empty subset.
	_, envoy := startPicker(t, newFakeCore("10.0.0.1:8000"), Config{Stream: StreamConfig{ConformanceHooks: true}})
	h := envoy.Open()
	h.Send(et.RequestHeaders(&fdModes, "/v1/completions", false, nil, SelectionHeader, "10.9.9.9:1"), et.RequestBody(tokenBody, true))
	h.Expect("immediate 503")
	h.Closed()
}
