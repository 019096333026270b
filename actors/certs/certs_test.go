package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/certs/certstest"
)

func TestLoadRefusesWhatCannotServe(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	good := ca.Server()
	other := ca.Server()
	for name, tc := range map[string]struct {
		p    certstest.Pair
		role Role
		want string
	}{
		"key of another certificate": {certstest.Pair{Cert: good.Cert, Key: other.Key}, RoleServer, "private key does not match"},
		"expired":                    {ca.Issue(certstest.Spec{NotAfter: time.Now().Add(-time.Minute)}), RoleServer, "expired"},
		"client certificate served":  {ca.Client(), RoleServer, "lacks ServerAuth"},
		"server certificate as peer": {good, RolePeer, "lacks ClientAuth"},
		"not PEM":                    {certstest.Pair{Cert: []byte("junk"), Key: good.Key}, RoleServer, "tls.crt and tls.key"},
	} {
		_, err := Load(certstest.Dir(t, tc.p, nil), "", tc.role, false, time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	b, err := Load(certstest.Dir(t, good, ca.PEM), "", RoleServer, true, time.Now())
	if err != nil || b.Leaf().SerialNumber.Cmp(good.Serial) != 0 || b.CA == nil {
		t.Fatalf("a good pair: %v", err)
	}
	// No extended key usage at all is valid for any role (cert-manager's
	// default usages).
	if _, err := Load(certstest.Dir(t, ca.Issue(certstest.Spec{}), nil), "", RolePeer, false, time.Now()); err != nil {
		t.Errorf("a certificate without extended key usage: %v", err)
	}
	if _, err := Load(certstest.Dir(t, good, []byte("no pem")), "", RoleServer, true, time.Now()); err == nil {
		t.Error("a CA file without a certificate was accepted")
	}
	if _, err := Load(t.TempDir(), "", RoleServer, false, time.Now()); err == nil {
		t.Error("an empty directory was accepted")
	}
}

func TestSelfSignedServesTheNames(t *testing.T) {
	t.Setenv("POD_IP", "10.1.2.3")
	b, err := SelfSigned(DefaultNames("kvrouter-epp.kv.svc"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf := b.Leaf()
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		t.Fatalf("usages %v / %v, want ServerAuth and digital signature", leaf.ExtKeyUsage, leaf.KeyUsage)
	}
	for _, name := range []string{"kvrouter-epp.kv.svc", "localhost", "10.1.2.3", "127.0.0.1"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if leaf.NotAfter.Sub(time.Now()) < 9*365*24*time.Hour || !b.SelfSigned {
		t.Errorf("valid until %s", leaf.NotAfter)
	}
	if err := checkLeaf(leaf, RoleServer, time.Now()); err != nil {
		t.Error(err)
	}
}

// serialSeen handshakes with a listener using cfg and returns the serial of
// the certificate it served.
func serialSeen(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	srv, cli := tcpPair(t)
	go func() { _ = tls.Server(srv, cfg).Handshake() }()
	c := tls.Client(cli, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	cs := c.ConnectionState()
	if cs.NegotiatedProtocol != "h2" {
		t.Errorf("ALPN %q, want h2", cs.NegotiatedProtocol)
	}
	return cs.PeerCertificates[0].SerialNumber.String()
}

func TestCheckReloadsAndKeepsTheOldOnABrokenPair(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	first, second := ca.Server(), ca.Server()
	dir := certstest.Dir(t, first, nil)
	var logs bytes.Buffer
	src, err := NewSource(SourceConfig{Name: "picker", Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ServerConfig(src, Policy{}, []string{"h2"})
	if got := serialSeen(t, cfg); got != first.Serial.String() {
		t.Fatalf("served %s, want %s", got, first.Serial)
	}
	if changed, err := src.Check(); changed || err != nil {
		t.Fatalf("unchanged files: changed %v, %v", changed, err)
	}
	certstest.Write(t, dir, second, nil)
	if changed, err := src.Check(); !changed || err != nil {
		t.Fatalf("rewritten files: changed %v, %v", changed, err)
	}
	if got := serialSeen(t, cfg); got != second.Serial.String() {
		t.Fatalf("after the reload served %s, want %s", got, second.Serial)
	}
	// A corrupt pair: the key of another certificate.
	certstest.WriteFile(t, filepath.Join(dir, KeyFile), first.Key)
	for range 2 { // counted once, however often it is read
		if changed, err := src.Check(); changed || err == nil {
			t.Fatalf("a broken pair: changed %v, %v", changed, err)
		}
	}
	if got := serialSeen(t, cfg); got != second.Serial.String() {
		t.Fatalf("after a broken pair served %s, want the old %s", got, second.Serial)
	}
	if src.Reloads() != 1 || src.Failures() != 1 {
		t.Fatalf("reloads %d, failures %d; want 1, 1", src.Reloads(), src.Failures())
	}
	if !strings.Contains(logs.String(), "keeping the current one") {
		t.Errorf("the refusal was not logged: %s", logs.String())
	}
	var m strings.Builder
	if err := WriteMetrics(&m, src); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`kvrouter_tls_reloads_total{listener="picker"} 1`, `kvrouter_tls_reload_failures_total{listener="picker"} 1`,
		`kvrouter_tls_certificate_expiry_timestamp_seconds{listener="picker"} `} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, m.String())
		}
	}
}

func TestNewSourceRefusesABrokenDirectory(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	if _, err := NewSource(SourceConfig{Name: "http", Dir: certstest.Dir(t, ca.Client(), nil)}); err == nil || !strings.Contains(err.Error(), "http TLS") {
		t.Fatalf("a client certificate for a listener: %v", err)
	}
	if _, err := NewSource(SourceConfig{Name: "picker", CA: true}); err == nil {
		t.Fatal("a client CA without a file was accepted")
	}
	src, err := NewSource(SourceConfig{Name: "picker", Names: []string{"epp.example"}})
	if err != nil || !src.Current().SelfSigned || src.Current().Leaf().VerifyHostname("epp.example") != nil {
		t.Fatalf("no directory: %v", err)
	}
	if changed, err := src.Check(); changed || err != nil {
		t.Fatalf("a self-signed source changed: %v %v", changed, err)
	}
}

// tcpPair is a loopback TCP connection's two ends, closed at the end of
// the test (net.Pipe does not buffer: an alert nobody reads blocks).
func tcpPair(t *testing.T) (srv, cli net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := lis.Accept()
		acc <- c
	}()
	cli, err = net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv = <-acc
	if srv == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv, cli
}

// handshake runs a TLS handshake between a server and a client config,
// returning each side's error.
func handshake(t *testing.T, srvCfg, cliCfg *tls.Config) (srvErr, cliErr error) {
	srv, cli := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		s := tls.Server(srv, srvCfg)
		err := s.Handshake()
		if err == nil {
			_, err = s.Read(make([]byte, 1)) // TLS 1.3: the client's certificate is checked before data
		}
		done <- err
		srv.Close()
	}()
	c := tls.Client(cli, cliCfg)
	cliErr = c.Handshake()
	if cliErr == nil {
		_, cliErr = c.Write([]byte{1})
	}
	return <-done, cliErr
}

func TestMutualTLSBetweenPeers(t *testing.T) {
	ca, rogue := certstest.NewCA(t, "cluster"), certstest.NewCA(t, "rogue")
	peer := func(ca *certstest.CA) *Source {
		src, err := NewSource(SourceConfig{Name: "cluster", Dir: certstest.Dir(t, ca.Peer(), ca.PEM), CA: true, Role: RolePeer})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	a, b, outsider := peer(ca), peer(ca), peer(rogue)
	client := func(s *Source) *tls.Config {
		c, err := ClientConfig(s, Policy{}, []string{"h2"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if se, ce := handshake(t, ServerConfig(a, Policy{}, []string{"h2"}), client(b)); se != nil || ce != nil {
		t.Fatalf("two peers of one CA: server %v, client %v", se, ce)
	}
	if se, _ := handshake(t, ServerConfig(a, Policy{}, []string{"h2"}), client(outsider)); se == nil {
		t.Error("a listener accepted a peer of another CA")
	}
	if _, ce := handshake(t, ServerConfig(outsider, Policy{}, []string{"h2"}), client(a)); ce == nil {
		t.Error("a dialer accepted a listener of another CA")
	}
	if se, _ := handshake(t, ServerConfig(a, Policy{}, []string{"h2"}), &tls.Config{InsecureSkipVerify: true}); se == nil {
		t.Error("a listener accepted a client without a certificate")
	}
	noCA, _ := NewSource(SourceConfig{Name: "x"})
	if _, err := ClientConfig(noCA, Policy{}, nil); err == nil {
		t.Error("a peer dialer without a CA was made")
	}
}

func TestPolicyParsing(t *testing.T) {
	for in, want := range map[string]uint16{"": tls.VersionTLS12, "1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13} {
		if got, err := ParseMinVersion(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseMinVersion("1.0"); err == nil {
		t.Error("TLS 1.0 accepted")
	}
	got, err := ParseCipherSuites("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384")
	if err != nil || !slices.Equal(got, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}) {
		t.Errorf("suites %v, %v", got, err)
	}
	for in, want := range map[string]string{"TLS_RSA_WITH_RC4_128_SHA": "insecure", "TLS_AES_128_GCM_SHA256": "TLS 1.3", "NOPE": "not one Go knows"} {
		if _, err := ParseCipherSuites(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	if got, err := ParseCipherSuites(""); got != nil || err != nil {
		t.Errorf("empty list: %v %v", got, err)
	}
	cfg := ServerConfig(nil, Policy{MinVersion: tls.VersionTLS13}, nil)
	if cfg.MinVersion != tls.VersionTLS13 {
		t.Errorf("min version %x", cfg.MinVersion)
	}
}
