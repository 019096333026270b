package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"time"
)

// selfSignedLife is how long a self-signed certificate is valid: longer
// than any process lives (it is made anew at every start), so a long-lived
// picker never serves an expired one to a client that does check dates.
const selfSignedLife = 10 * 365 * 24 * time.Hour

// SelfSigned makes a self-signed ServerAuth certificate for names (DNS
// names and IP addresses; empty ones are skipped), valid from an hour
// before now (clock skew) for ten years. The key never leaves memory.
func SelfSigned(names []string, now time.Time) (*Bundle, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"kvrouter"}, CommonName: "kvrouter"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedLife),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, n := range names {
		switch ip := net.ParseIP(n); {
		case n == "":
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		default:
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	if len(tmpl.DNSNames) > 0 {
		tmpl.Subject.CommonName = tmpl.DNSNames[0]
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Bundle{Cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Digest: sha256.Sum256(der), SelfSigned: true}, nil
}

// DefaultNames are the names a self-signed certificate carries besides the
// configured ones: the host name, the pod IP (POD_IP, as the chart sets
// it), localhost and the loopback addresses.
func DefaultNames(extra ...string) []string {
	names := slices.Clone(extra)
	if h, err := os.Hostname(); err == nil {
		names = append(names, h)
	}
	names = append(names, os.Getenv("POD_IP"), "localhost", "127.0.0.1", "::1")
	out := names[:0]
	for _, n := range names {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
