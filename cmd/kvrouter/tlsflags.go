package main

import (
	"flag"
	"fmt"

	"github.com/kvrouter/kvrouter/actors/certs"
)

// tlsPolicyFlags are the protocol policy of every TLS listener serve runs
// (package actors/certs).
type tlsPolicyFlags struct {
	minVersion, ciphers string
}

func addTLSPolicyFlags(fs *flag.FlagSet) *tlsPolicyFlags {
	f := &tlsPolicyFlags{}
	fs.StringVar(&f.minVersion, "tls-min-version", "1.2", "oldest TLS version serve's TLS listeners accept: 1.2 or 1.3")
	fs.StringVar(&f.ciphers, "tls-cipher-suites", "", "comma-separated TLS 1.2 cipher suites the TLS listeners allow, as Go names them (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,...; empty: Go's secure defaults; TLS 1.3's are not configurable)")
	return f
}

// policy checks the flags.
func (f *tlsPolicyFlags) policy() (certs.Policy, error) {
	v, err := certs.ParseMinVersion(f.minVersion)
	if err != nil {
		return certs.Policy{}, fmt.Errorf("--tls-min-version: %w", err)
	}
	cs, err := certs.ParseCipherSuites(f.ciphers)
	if err != nil {
		return certs.Policy{}, fmt.Errorf("--tls-cipher-suites: %w", err)
	}
	return certs.Policy{MinVersion: v, CipherSuites: cs}, nil
}
