package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/kvrouter/kvrouter/actors/certs"
)

// tlsFlags are the protocol policy of every TLS listener serve runs, the
// certificate directories of the HTTP API and the proxy (off by default),
// and how often the directories are re-read (package actors/certs).
type tlsFlags struct {
	minVersion, ciphers string
	httpDir, proxyDir   string
	checkEvery          time.Duration
}

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	f := &tlsFlags{}
	fs.StringVar(&f.minVersion, "tls-min-version", "1.2", "oldest TLS version serve's TLS listeners accept: 1.2 or 1.3")
	fs.StringVar(&f.ciphers, "tls-cipher-suites", "", "comma-separated TLS 1.2 cipher suites the TLS listeners allow, as Go names them (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,...; empty: Go's secure defaults; TLS 1.3's are not configurable)")
	fs.StringVar(&f.httpDir, "http-cert-dir", "", "serve the HTTP API over TLS with DIR/tls.crt and DIR/tls.key (a mounted Kubernetes TLS Secret), re-read when they change; empty: plaintext")
	fs.StringVar(&f.proxyDir, "proxy-cert-dir", "", "serve the OpenAI proxy over TLS with DIR/tls.crt and DIR/tls.key, re-read when they change; empty: plaintext")
	fs.DurationVar(&f.checkEvery, "tls-check-every", certs.DefaultCheckEvery, "how often certificate directories (--epp-cert-dir, --http-cert-dir, --proxy-cert-dir, --cluster-tls-dir) are re-read")
	return f
}

// policy checks the flags.
func (f *tlsFlags) policy() (certs.Policy, error) {
	v, err := certs.ParseMinVersion(f.minVersion)
	if err != nil {
		return certs.Policy{}, fmt.Errorf("--tls-min-version: %w", err)
	}
	cs, err := certs.ParseCipherSuites(f.ciphers)
	if err != nil {
		return certs.Policy{}, fmt.Errorf("--tls-cipher-suites: %w", err)
	}
	if f.checkEvery <= 0 {
		return certs.Policy{}, fmt.Errorf("--tls-check-every %s: must be positive", f.checkEvery)
	}
	return certs.Policy{MinVersion: v, CipherSuites: cs}, nil
}

// tlsSources are serve's certificates: reloaded together, exported as one
// set of metric families.
type tlsSources []*certs.Source

// serverTLS loads dir's certificate for the listener name ("" dir: nil,
// plaintext) and adds it to the set.
func (s *tlsSources) serverTLS(name, flagName, dir string, p certs.Policy, logger *slog.Logger) (*certs.Source, error) {
	if dir == "" {
		return nil, nil
	}
	src, err := certs.NewSource(certs.SourceConfig{Name: name, Dir: dir, Role: certs.RoleServer, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	s.add(src)
	return src, nil
}

// add puts src in the set (nil: nothing).
func (s *tlsSources) add(src *certs.Source) {
	if src != nil {
		*s = append(*s, src)
	}
}

// watch re-reads every directory each interval until ctx ends.
func (s tlsSources) watch(ctx context.Context, every time.Duration) {
	for _, src := range s {
		go src.Watch(ctx, every)
	}
}

// WriteMetrics writes kvrouter_tls_* for the set (nothing when empty).
func (s tlsSources) WriteMetrics(w io.Writer) error {
	if len(s) == 0 {
		return nil
	}
	return certs.WriteMetrics(w, s...)
}

// listen serves srv, with TLS over src when it is set (HTTP/2 and
// HTTP/1.1 offered).
func listen(srv *http.Server, src *certs.Source, p certs.Policy) error {
	if src == nil {
		return srv.ListenAndServe()
	}
	srv.TLSConfig = certs.ServerConfig(src, p, []string{"h2", "http/1.1"})
	return srv.ListenAndServeTLS("", "")
}
