// Package certstest makes certificate authorities and certificates for
// tests, and writes them where a listener reads them (a directory laid out
// as a Kubernetes TLS Secret mounts it).
package certstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	tb   testing.TB
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate (ca.crt).
	PEM []byte
}

// NewCA makes a CA valid for a day around now.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{tb: tb, cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pair is a certificate and its key, PEM-encoded.
type Pair struct {
	Cert, Key []byte
	Serial    *big.Int
}

// Spec says what a certificate is for.
type Spec struct {
	Names    []string // DNS names and IP addresses
	Usages   []x509.ExtKeyUsage
	NotAfter time.Time // zero: a day from now
}

// Issue signs a certificate for spec.
func (ca *CA) Issue(spec Spec) Pair {
	ca.tb.Helper()
	key := newKey(ca.tb)
	tmpl := &x509.Certificate{SerialNumber: serial(ca.tb), Subject: pkix.Name{CommonName: "kvrouter-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: spec.NotAfter, ExtKeyUsage: spec.Usages,
		KeyUsage: x509.KeyUsageDigitalSignature}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	for _, n := range spec.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.tb.Fatal(err)
	}
	return Pair{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), Serial: tmpl.SerialNumber}
}

// Server issues a ServerAuth certificate for localhost and 127.0.0.1.
func (ca *CA) Server() Pair {
	return ca.Issue(Spec{Names: []string{"localhost", "127.0.0.1"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
}

// Peer issues a certificate for both ends of a connection (a router host).
func (ca *CA) Peer() Pair {
	return ca.Issue(Spec{Names: []string{"localhost", "127.0.0.1"},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
}

// Client issues a ClientAuth certificate.
func (ca *CA) Client() Pair {
	return ca.Issue(Spec{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// Write puts p (and ca.crt when caPEM is not nil) in dir, each file
// replaced by a rename as a Secret update replaces it.
func Write(tb testing.TB, dir string, p Pair, caPEM []byte) {
	tb.Helper()
	files := map[string][]byte{"tls.crt": p.Cert, "tls.key": p.Key}
	if caPEM != nil {
		files["ca.crt"] = caPEM
	}
	for name, b := range files {
		WriteFile(tb, filepath.Join(dir, name), b)
	}
}

// WriteFile replaces path's contents with b by a rename.
func WriteFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// Dir makes a directory holding p (and ca.crt when caPEM is not nil).
func Dir(tb testing.TB, p Pair, caPEM []byte) string {
	tb.Helper()
	dir := tb.TempDir()
	Write(tb, dir, p, caPEM)
	return dir
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
