package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/kvrouter/kvrouter/actors/certs"
)

// eppServingFlags say how the picker's ext_proc port is secured and where
// it is probed: TLS by default, as every gateway implementing InferencePool
// dials it (TLS, ALPN h2, the certificate not verified), and the gRPC
// health services on a plaintext port of their own (kubelet's gRPC probes
// cannot speak TLS).
type eppServingFlags struct {
	secure       bool
	certDir      string
	certNames    string
	clientCA     string
	healthListen string
	hooks        bool
}

// DefaultEPPHealthPort is the health port of the reference pickers.
const DefaultEPPHealthPort = "9003"

func addEPPServingFlags(fs *flag.FlagSet) *eppServingFlags {
	f := &eppServingFlags{}
	fs.BoolVar(&f.secure, "epp-secure-serving", true, "serve the picker's ext_proc port over TLS (ALPN h2), as the InferencePool gateways dial it; false: plaintext h2c (llm-d's standalone agentgateway, a hand-written Envoy)")
	fs.StringVar(&f.certDir, "epp-cert-dir", "", "directory holding the picker's tls.crt and tls.key (a mounted Kubernetes TLS Secret), re-read when the files change; empty: a self-signed certificate made in memory at start")
	fs.StringVar(&f.certNames, "epp-cert-names", "", "comma-separated extra DNS names or IPs of the self-signed certificate (the host name, POD_IP, localhost and loopback are always in)")
	fs.StringVar(&f.clientCA, "epp-client-ca", "", "PEM file of the CA whose client certificates the picker requires (mTLS); empty: no client certificate asked")
	fs.StringVar(&f.healthListen, "epp-health-listen", ":"+DefaultEPPHealthPort, "plaintext gRPC health port of the picker (services \"\", liveness, readiness, inference-extension, envoy.service.ext_proc.v3.ExternalProcessor); a bare :PORT takes --epp-listen's host; empty: off")
	fs.BoolVar(&f.hooks, "epp-conformance-hooks", false, "honour the conformance suite's test-epp-endpoint-selection header (it lets a client choose its endpoint: test gateways only) and echo the served endpoint in x-conformance-test-served-endpoint")
	return f
}

// tlsConfig is the ext_proc listener's TLS (nil: h2c) and its certificate
// source (for reloads and metrics).
func (f *eppServingFlags) tlsConfig(p certs.Policy, logger *slog.Logger) (*tls.Config, *certs.Source, error) {
	if !f.secure {
		if f.certDir != "" || f.clientCA != "" || f.certNames != "" {
			return nil, nil, errors.New("--epp-cert-dir, --epp-cert-names and --epp-client-ca need --epp-secure-serving")
		}
		return nil, nil, nil
	}
	var names []string
	for _, n := range strings.Split(f.certNames, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) > 0 && f.certDir != "" {
		return nil, nil, errors.New("--epp-cert-names names the self-signed certificate's SANs: not with --epp-cert-dir")
	}
	src, err := certs.NewSource(certs.SourceConfig{Name: "picker", Dir: f.certDir, CA: f.clientCA != "", CAPath: f.clientCA,
		Role: certs.RoleServer, Names: names, Logger: logger})
	if err != nil {
		return nil, nil, fmt.Errorf("--epp-cert-dir: %w", err)
	}
	return certs.ServerConfig(src, p, []string{"h2"}), src, nil
}

// healthAddr is where the health port listens ("" : off); a bare :PORT
// takes the ext_proc listener's host.
func (f *eppServingFlags) healthAddr(eppAddr string) (string, error) {
	if f.healthListen == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(f.healthListen)
	if err != nil {
		return "", fmt.Errorf("--epp-health-listen %q: want HOST:PORT or :PORT: %v", f.healthListen, err)
	}
	if host == "" {
		host, _, _ = net.SplitHostPort(eppAddr)
	}
	return net.JoinHostPort(host, port), nil
}
