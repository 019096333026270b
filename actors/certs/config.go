package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// Policy is the protocol policy of a listener or dialer.
type Policy struct {
	// MinVersion is the oldest TLS version accepted (0: TLS 1.2).
	MinVersion uint16
	// CipherSuites restricts TLS 1.2's suites (nil: Go's defaults; TLS
	// 1.3's are not configurable).
	CipherSuites []uint16
}

// ParseMinVersion reads a --tls-min-version value: 1.2 or 1.3.
func ParseMinVersion(s string) (uint16, error) {
	switch s {
	case "", "1.2", "VersionTLS12":
		return tls.VersionTLS12, nil
	case "1.3", "VersionTLS13":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("TLS version %q: want 1.2 or 1.3 (older ones are not offered)", s)
}

// ParseCipherSuites reads a comma-separated list of cipher suite names as
// Go and IANA spell them (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, …).
// Suites Go lists as insecure are refused, and so are TLS 1.3 suites (not
// configurable). "" is nil: Go's defaults.
func ParseCipherSuites(s string) ([]uint16, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []uint16
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(tls.CipherSuites(), func(c *tls.CipherSuite) bool { return c.Name == name })
		if i < 0 {
			if slices.ContainsFunc(tls.InsecureCipherSuites(), func(c *tls.CipherSuite) bool { return c.Name == name }) {
				return nil, fmt.Errorf("cipher suite %s is insecure", name)
			}
			return nil, fmt.Errorf("cipher suite %q is not one Go knows (want names such as TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)", name)
		}
		c := tls.CipherSuites()[i]
		if !slices.Contains(c.SupportedVersions, tls.VersionTLS12) {
			return nil, fmt.Errorf("cipher suite %s is TLS 1.3's: not configurable", name)
		}
		out = append(out, c.ID)
	}
	return out, nil
}

func (p Policy) base(nextProtos []string) *tls.Config {
	c := &tls.Config{MinVersion: p.MinVersion, CipherSuites: p.CipherSuites, NextProtos: slices.Clone(nextProtos)}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// ServerConfig is a listener's configuration over src: every handshake
// takes src's current bundle, and when it has a CA, a client must present
// a certificate from it (mTLS). nextProtos are the ALPN protocols offered
// (a gRPC listener: "h2").
func ServerConfig(src *Source, p Policy, nextProtos []string) *tls.Config {
	base := p.base(nextProtos)
	type made struct {
		b *Bundle
		c *tls.Config
	}
	var last atomic.Pointer[made]
	outer := base.Clone()
	outer.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		b := src.Current()
		if m := last.Load(); m != nil && m.b == b {
			return m.c, nil
		}
		c := base.Clone()
		c.Certificates = []tls.Certificate{b.Cert}
		if b.CA != nil {
			c.ClientCAs, c.ClientAuth = b.CA, tls.RequireAndVerifyClientCert
		}
		last.Store(&made{b, c})
		return c, nil
	}
	// Used only by callers that read it before a handshake (and by
	// servers that ignore GetConfigForClient): the same source.
	outer.GetCertificate = src.certificate
	return outer
}

// ClientConfig is a dialer's configuration over src for mTLS between peers
// that share a CA (the router hosts): it presents src's current
// certificate and accepts a server whose certificate chains to src's
// current CA with ServerAuth. The server's name is not checked — hosts
// dial each other by address, and belonging to the cluster is what the CA
// says.
func ClientConfig(src *Source, p Policy, nextProtos []string) (*tls.Config, error) {
	if src.Current().CA == nil {
		return nil, errors.New("a peer dialer needs a CA")
	}
	c := p.base(nextProtos)
	c.GetClientCertificate = src.clientCertificate
	// Verification is done below, against the CA current at the handshake.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the peer presented no certificate")
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: src.Current().CA, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
	return c, nil
}
