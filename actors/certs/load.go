package certs

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The files of a certificate directory (a Kubernetes TLS Secret's keys).
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// maxFile bounds each file read from a certificate directory: a chain and
// a key are a few KiB, a CA bundle rarely more than a few hundred.
const maxFile = 1 << 20

// Role is what a certificate is presented for: the extended key usage its
// leaf must allow.
type Role uint8

// Roles.
const (
	RoleServer Role = iota // a listener's certificate: ServerAuth
	RoleClient             // a dialer's certificate: ClientAuth
	RolePeer               // a router host's, both listener and dialer: both
)

// Bundle is one loaded, checked certificate with its CA pool (nil: no
// client verification, or the system's roots for a dialer).
type Bundle struct {
	Cert tls.Certificate
	// CA is the pool peers' certificates are verified against.
	CA *x509.CertPool
	// Digest identifies the files' contents the bundle was made from.
	Digest [sha256.Size]byte
	// SelfSigned: made in memory, not read from a directory.
	SelfSigned bool
}

// Leaf returns the bundle's leaf certificate.
func (b *Bundle) Leaf() *x509.Certificate { return b.Cert.Leaf }

// files are a directory's raw contents.
type files struct {
	cert, key, ca []byte
}

// digest identifies the contents (what Check compares).
func (f files) digest() [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{f.cert, f.key, f.ca} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// readDir reads dir's files; the CA file only when wantCA, a custom CA
// path (caPath ≠ "") instead of dir's ca.crt.
func readDir(dir, caPath string, wantCA bool) (files, error) {
	var f files
	var err error
	if f.cert, err = readCapped(filepath.Join(dir, CertFile)); err != nil {
		return f, err
	}
	if f.key, err = readCapped(filepath.Join(dir, KeyFile)); err != nil {
		return f, err
	}
	if wantCA {
		if caPath == "" {
			caPath = filepath.Join(dir, CAFile)
		}
		if f.ca, err = readCapped(caPath); err != nil {
			return f, err
		}
	}
	return f, nil
}

func readCapped(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxFile)
	}
	return b, nil
}

// parse checks raw files and makes a Bundle of them (the pure core of
// Load: no I/O).
func parse(f files, role Role, wantCA bool, now time.Time) (*Bundle, error) {
	cert, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", CertFile, KeyFile, err)
	}
	if cert.Leaf == nil { // X509KeyPair fills it since Go 1.23
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", CertFile, err)
		}
	}
	if err := checkLeaf(cert.Leaf, role, now); err != nil {
		return nil, fmt.Errorf("%s: %w", CertFile, err)
	}
	b := &Bundle{Cert: cert, Digest: f.digest()}
	if wantCA {
		b.CA = x509.NewCertPool()
		if !b.CA.AppendCertsFromPEM(f.ca) {
			return nil, errors.New("CA file: no PEM certificate in it")
		}
	}
	return b, nil
}

// checkLeaf refuses a leaf that is not valid now or not for role.
func checkLeaf(leaf *x509.Certificate, role Role, now time.Time) error {
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if len(leaf.ExtKeyUsage) == 0 {
		return nil // no extended key usage: valid for any
	}
	need := map[Role][]x509.ExtKeyUsage{RoleServer: {x509.ExtKeyUsageServerAuth}, RoleClient: {x509.ExtKeyUsageClientAuth},
		RolePeer: {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}[role]
	for _, u := range need {
		if !hasUsage(leaf, u) {
			return fmt.Errorf("extended key usage lacks %s", usageNames[u])
		}
	}
	return nil
}

var usageNames = map[x509.ExtKeyUsage]string{x509.ExtKeyUsageServerAuth: "ServerAuth", x509.ExtKeyUsageClientAuth: "ClientAuth"}

func hasUsage(leaf *x509.Certificate, u x509.ExtKeyUsage) bool {
	for _, have := range leaf.ExtKeyUsage {
		if have == u || have == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// loadCA reads a PEM CA bundle.
func loadCA(path string) (*x509.CertPool, error) {
	b, err := readCapped(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// Load reads and checks dir's certificate pair (and CA, when wantCA:
// caPath, or dir's ca.crt when caPath is "").
func Load(dir, caPath string, role Role, wantCA bool, now time.Time) (*Bundle, error) {
	f, err := readDir(dir, caPath, wantCA)
	if err != nil {
		return nil, err
	}
	return parse(f, role, wantCA, now)
}
