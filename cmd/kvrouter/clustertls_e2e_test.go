package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/certs/certstest"
)

// TestClusterHostsMutualTLS (make test-cluster): three `kvrouter serve
// --cluster` processes on etcd with --cluster-tls-dir certificates from
// one CA become ready — they exchange messages over mutual TLS — and a
// fourth with a certificate from another CA joins etcd's membership but
// is refused: every host's /readyz answers 503 members_unreachable
// naming it and /metrics counts it, and the stranger is not ready either.
func TestClusterHostsMutualTLS(t *testing.T) {
	c := newE2EBase(t)
	ca, other := certstest.NewCA(t, "cluster-ca"), certstest.NewCA(t, "another-ca")
	dir := certstest.Dir(t, ca.Peer(), ca.PEM)
	for range 3 {
		c.addHost(t, "--cluster-tls-dir", dir)
	}
	good := c.hosts
	for _, h := range good {
		c.eventually(t, h.url+" counts no unreachable member", 30*time.Second, func() error {
			return metricIs(h, "kvrouter_cluster_unreachable_members 0")
		})
	}
	stranger := c.startHost(t, "--cluster-tls-dir", certstest.Dir(t, other.Peer(), other.PEM))
	for _, h := range good {
		c.eventually(t, h.url+" refuses the stranger", 30*time.Second, func() error {
			resp, err := http.Get(h.url + "/readyz")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "members_unreachable") {
				return fmt.Errorf("/readyz: %s %s", resp.Status, b)
			}
			return metricIs(h, "kvrouter_cluster_unreachable_members 1")
		})
	}
	c.eventually(t, "the stranger not ready (no host answers it)", 30*time.Second, func() error {
		if _, err := stranger.get("/readyz"); err == nil {
			return errors.New("the host with another CA's certificate is ready")
		}
		return nil
	})
}

// metricIs checks h's /metrics has line.
func metricIs(h *e2eHost, line string) error {
	b, err := h.get("/metrics")
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), line+"\n") {
		return fmt.Errorf("/metrics lacks %q", line)
	}
	return nil
}
