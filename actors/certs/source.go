package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCheckEvery is how often Watch reads a certificate directory.
const DefaultCheckEvery = 10 * time.Second

// Source is the current certificate of one listener or dialer: a Bundle
// read from a directory (and re-read by Check), or a fixed one.
type Source struct {
	name   string // the metrics' listener label
	dir    string
	caPath string
	role   Role
	wantCA bool
	now    func() time.Time
	logger *slog.Logger

	cur atomic.Pointer[Bundle]
	// mu orders Checks; seen is the digest of the last contents read
	// (loaded or refused), so one broken pair is counted once.
	mu      sync.Mutex
	seen    [32]byte
	seenErr error // why seen was refused (nil: it is the current bundle)

	reloads, failures atomic.Uint64
}

// SourceConfig says where a Source's certificate comes from.
type SourceConfig struct {
	// Name labels the source in logs and metrics (picker, http, proxy,
	// cluster).
	Name string
	// Dir holds tls.crt and tls.key ("" : a self-signed certificate for
	// Names, see SelfSigned).
	Dir string
	// CA asks for a CA pool: from CAPath, else Dir's ca.crt.
	CA     bool
	CAPath string
	Role   Role
	// Names are the self-signed certificate's extra SANs.
	Names []string
	// Now is the clock validity is checked against (nil: time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// NewSource loads the first certificate: a directory that does not hold a
// valid pair is an error (a listener must not start without one).
func NewSource(cfg SourceConfig) (*Source, error) {
	s := &Source{name: cfg.Name, dir: cfg.Dir, caPath: cfg.CAPath, role: cfg.Role, wantCA: cfg.CA, now: cfg.Now, logger: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		if cfg.CA && cfg.CAPath == "" {
			return nil, fmt.Errorf("%s TLS: a client CA needs a CA file when there is no certificate directory", cfg.Name)
		}
		b, err := SelfSigned(DefaultNames(cfg.Names...), s.now())
		if err != nil {
			return nil, err
		}
		if cfg.CA {
			ca, err := loadCA(cfg.CAPath)
			if err != nil {
				return nil, fmt.Errorf("%s TLS: %w", cfg.Name, err)
			}
			b.CA = ca
		}
		s.cur.Store(b)
		return s, nil
	}
	f, err := readDir(s.dir, s.caPath, s.wantCA)
	if err != nil {
		return nil, fmt.Errorf("%s TLS: %w", cfg.Name, err)
	}
	b, err := parse(f, s.role, s.wantCA, s.now())
	if err != nil {
		return nil, fmt.Errorf("%s TLS, %s: %w", cfg.Name, s.dir, err)
	}
	s.seen = b.Digest
	s.cur.Store(b)
	return s, nil
}

// Current returns the bundle new handshakes use.
func (s *Source) Current() *Bundle { return s.cur.Load() }

// Check re-reads the directory: changed contents that make a valid pair
// replace the current bundle (changed true); contents that do not are
// logged and counted once, and the current bundle stays (err set). A
// source without a directory never changes.
func (s *Source) Check() (changed bool, err error) {
	if s.dir == "" {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := readDir(s.dir, s.caPath, s.wantCA)
	if err != nil {
		// A file missing or unreadable mid-update: tried again next time,
		// counted only if it lasts (the same error is not re-counted).
		return false, s.refuse(f.digest(), err)
	}
	d := f.digest()
	if d == s.seen {
		return false, s.seenErr
	}
	b, err := parse(f, s.role, s.wantCA, s.now())
	if err != nil {
		return false, s.refuse(d, err)
	}
	s.seen, s.seenErr = b.Digest, nil
	s.cur.Store(b)
	s.reloads.Add(1)
	s.logger.Info("TLS certificate reloaded", "listener", s.name, "dir", s.dir,
		"serial", b.Leaf().SerialNumber.String(), "not_after", b.Leaf().NotAfter.UTC().Format(time.RFC3339))
	return true, nil
}

// refuse counts and logs contents d that do not make a bundle, once.
func (s *Source) refuse(d [32]byte, err error) error {
	if d != s.seen || s.seenErr == nil {
		s.seen, s.seenErr = d, err
		s.failures.Add(1)
		s.logger.Warn("TLS certificate not reloaded: keeping the current one", "listener", s.name, "dir", s.dir, "err", err)
	}
	return err
}

// Watch runs Check every interval (≤ 0: DefaultCheckEvery) until ctx ends.
func (s *Source) Watch(ctx context.Context, every time.Duration) {
	if s.dir == "" {
		return
	}
	if every <= 0 {
		every = DefaultCheckEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.Check()
		}
	}
}

// Reloads and Failures count the bundles swapped in and the contents
// refused.
func (s *Source) Reloads() uint64  { return s.reloads.Load() }
func (s *Source) Failures() uint64 { return s.failures.Load() }

// certificate is tls.Config.GetCertificate over the source.
func (s *Source) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.Current().Cert, nil
}

// clientCertificate is tls.Config.GetClientCertificate over the source.
func (s *Source) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return &s.Current().Cert, nil
}

// WriteMetrics writes the sources' figures in the Prometheus text format:
//
//	kvrouter_tls_reloads_total{listener}            certificates reloaded from the directory
//	kvrouter_tls_reload_failures_total{listener}    directory contents refused (the old certificate kept)
//	kvrouter_tls_certificate_expiry_timestamp_seconds{listener}  the current certificate's NotAfter
func WriteMetrics(w io.Writer, sources ...*Source) error {
	var b []byte
	fam := func(name, kind, help string, v func(*Source) string) {
		b = append(b, "# HELP "+name+" "+help+"\n# TYPE "+name+" "+kind+"\n"...)
		for _, s := range sources {
			b = append(b, name+`{listener="`+s.name+`"} `+v(s)+"\n"...)
		}
	}
	fam("kvrouter_tls_reloads_total", "counter", "TLS certificates reloaded from their directory.",
		func(s *Source) string { return strconv.FormatUint(s.Reloads(), 10) })
	fam("kvrouter_tls_reload_failures_total", "counter", "TLS certificate directory contents refused (the current certificate kept).",
		func(s *Source) string { return strconv.FormatUint(s.Failures(), 10) })
	fam("kvrouter_tls_certificate_expiry_timestamp_seconds", "gauge", "When the TLS certificate in use expires (Unix time).",
		func(s *Source) string { return strconv.FormatInt(s.Current().Leaf().NotAfter.Unix(), 10) })
	_, err := w.Write(b)
	return err
}
