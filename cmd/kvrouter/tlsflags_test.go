package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/certs/certstest"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// TestServeHTTPAndProxyTLS: with --http-cert-dir and --proxy-cert-dir the
// HTTP API and the proxy serve TLS from their directories (a client
// trusting the CA is answered, a plaintext one is not); rewriting a
// directory gives new connections the new certificate, a corrupt update
// keeps it and is counted, both on /metrics.
func TestServeHTTPAndProxyTLS(t *testing.T) {
	ca := certstest.NewCA(t, "serving-ca")
	first := ca.Server()
	httpDir, proxyDir := certstest.Dir(t, first, nil), certstest.Dir(t, ca.Server(), nil)
	api, proxy := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	s := serveInProcess(t, "--http", api, "--http-cert-dir", httpDir, "--proxy-listen", proxy, "--proxy-cert-dir", proxyDir,
		"--tls-check-every", "20ms", "--drain-timeout", "0s")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	// A new connection each time: what a client that connects after a
	// rotation sees.
	get := func(url string) (serial *big.Int, status int, body string, err error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		resp, err := c.Get(url)
		if err != nil {
			return nil, 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.TLS != nil {
			serial = resp.TLS.PeerCertificates[0].SerialNumber
		}
		return serial, resp.StatusCode, string(b), nil
	}
	eventually.True(t, "the HTTP API answers over TLS", func() (bool, string) {
		serial, code, _, err := get("https://" + api + "/healthz")
		return err == nil && code == http.StatusOK && serial.Cmp(first.Serial) == 0, fmt.Sprint(serial, code, err)
	})
	if _, code, _, err := get("https://" + proxy + "/v1/models"); err != nil || code == 0 {
		t.Fatalf("the proxy over TLS: %d %v", code, err)
	}
	if _, code, _, err := get("http://" + api + "/healthz"); err == nil && code == http.StatusOK {
		t.Fatal("a plaintext client was answered by the TLS HTTP API")
	}

	second := ca.Server()
	certstest.Write(t, httpDir, second, nil)
	eventually.True(t, "new connections get the rewritten certificate", func() (bool, string) {
		serial, _, _, err := get("https://" + api + "/healthz")
		return err == nil && serial.Cmp(second.Serial) == 0, fmt.Sprint(serial, err)
	})
	certstest.WriteFile(t, filepath.Join(httpDir, "tls.crt"), []byte("not a certificate"))
	eventually.True(t, "a corrupt update counted", func() (bool, string) {
		_, _, m, err := get("https://" + api + "/metrics")
		return err == nil && strings.Contains(m, `kvrouter_tls_reload_failures_total{listener="http"} 1`) &&
			strings.Contains(m, `kvrouter_tls_reloads_total{listener="http"} 1`) &&
			strings.Contains(m, `kvrouter_tls_reloads_total{listener="proxy"} 0`), fmt.Sprint(err)
	})
	if serial, _, _, err := get("https://" + api + "/healthz"); err != nil || serial.Cmp(second.Serial) != 0 {
		t.Fatalf("after a corrupt update: serial %v (%v), want the last good one %v", serial, err, second.Serial)
	}
	s.signal(t)
	s.exited(t)
}

// TestTLSFlagsRefuseWhatCannotServe: a bad policy or directory stops serve
// at start with the flag named (a cluster directory needs a cluster, a CA
// and a certificate for both ends).
func TestTLSFlagsRefuseWhatCannotServe(t *testing.T) {
	serverOnly := certstest.Dir(t, certstest.NewCA(t, "ca").Server(), nil) // no ca.crt, no ClientAuth
	for args, want := range map[string]string{
		"--tls-min-version 1.1":                                               "--tls-min-version",
		"--tls-cipher-suites TLS_RSA_WITH_RC4_128_SHA":                        "--tls-cipher-suites",
		"--tls-check-every 0s":                                                "--tls-check-every",
		"--http-cert-dir /nonexistent":                                        "--http-cert-dir",
		"--proxy-cert-dir " + t.TempDir():                                     "--proxy-cert-dir",
		"--epp-listen :0 --epp-cert-dir /nonexistent":                         "--epp-cert-dir",
		"--drain-timeout -1s":                                                 "--drain-timeout",
		"--cluster-tls-dir /x":                                                "--cluster-tls-dir needs --cluster",
		"--cluster c --cluster-provider test --cluster-tls-dir " + serverOnly: "--cluster-tls-dir",
	} {
		var errb strings.Builder
		if code := run(append([]string{"serve", "--http", "127.0.0.1:0"}, strings.Fields(args)...), nil, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d, stderr %q: want 2 naming %s", args, code, errb.String(), want)
		}
	}
}
