package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/kvrouter/kvrouter/actors/certs"
	"github.com/kvrouter/kvrouter/actors/service"
)

// clusterTLS secures the traffic between router hosts (protoactor remote's
// gRPC) with mutual TLS from dir's ca.crt, tls.crt and tls.key: every host
// presents a certificate from the cluster's CA (ServerAuth and ClientAuth)
// and accepts only peers with one. The source is returned for reloads and
// metrics (nil: no dir, plaintext).
func clusterTLS(cc *service.ClusterConfig, dir string, p certs.Policy, logger *slog.Logger) (*certs.Source, error) {
	if dir == "" {
		return nil, nil
	}
	if cc == nil {
		return nil, errors.New("--cluster-tls-dir needs --cluster")
	}
	src, err := certs.NewSource(certs.SourceConfig{Name: "cluster", Dir: dir, CA: true, Role: certs.RolePeer, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--cluster-tls-dir: %w", err)
	}
	dial, err := certs.ClientConfig(src, p, []string{"h2"})
	if err != nil {
		return nil, fmt.Errorf("--cluster-tls-dir: %w", err)
	}
	cc.Member.ServerTLS, cc.Member.DialTLS = certs.ServerConfig(src, p, []string{"h2"}), dial
	return src, nil
}
