//go:build !race

package service

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/certs"
	"github.com/kvrouter/kvrouter/actors/certs/certstest"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages/api"
)

// peerTLS is a member's mutual TLS from a certificate ca issued, as
// kvrouter serve --cluster-tls-dir builds it.
func peerTLS(t *testing.T, ca *certstest.CA) member.Config {
	t.Helper()
	src, err := certs.NewSource(certs.SourceConfig{Name: "cluster", Dir: certstest.Dir(t, ca.Peer(), ca.PEM), CA: true, Role: certs.RolePeer})
	if err != nil {
		t.Fatal(err)
	}
	dial, err := certs.ClientConfig(src, certs.Policy{}, []string{"h2"})
	if err != nil {
		t.Fatal(err)
	}
	return member.Config{Bind: "127.0.0.1:0", ServerTLS: certs.ServerConfig(src, certs.Policy{}, []string{"h2"}), DialTLS: dial}
}

// answeredBy reports how many other members answered h.
func answeredBy(h *Host) int {
	h.Service.mu.Lock()
	defer h.Service.mu.Unlock()
	return len(h.Service.reach.answer)
}

// Several members in one process race inside protoactor-go: this test runs
// without -race, as the other cluster tests of this package.
//
// Three hosts with certificates from the cluster's CA exchange messages
// over mutual TLS; a fourth with a certificate from another CA is listed
// by the provider but refused by every one of them — each says so in its
// readiness (members_unreachable, naming it) and in
// kvrouter_cluster_unreachable_members — while each is answered by the
// other two, and the stranger reaches none of them.
func TestClusterMutualTLS(t *testing.T) {
	t.Parallel()
	ca, other := certstest.NewCA(t, "cluster-ca"), certstest.NewCA(t, "another-ca")
	hs := startMemberConfigs(t, peerTLS(t, ca), peerTLS(t, ca), peerTLS(t, ca), peerTLS(t, other))
	good, stranger := hs[:3], hs[3]
	strangerAddr := stranger.Node.Member().Cluster.ActorSystem.Address()
	for i, h := range good {
		err := readyWithin(t, h, fmt.Sprintf("host %d refuses the stranger", i), func(err error) bool {
			return errors.Is(err, api.ErrUnavailable) && answeredBy(h) == 2
		})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Reason != reasonMembersUnreachable || !strings.Contains(err.Error(), strangerAddr) {
			t.Errorf("host %d: %v, want %s naming %s", i, err, reasonMembersUnreachable, strangerAddr)
		}
		var m strings.Builder
		if err := h.Service.UnreachableMembers(&m); err != nil || !strings.Contains(m.String(), "kvrouter_cluster_unreachable_members 1\n") {
			t.Errorf("host %d metrics (%v):\n%s", i, err, m.String())
		}
	}
	readyWithin(t, stranger, "the stranger reaches no one", func(err error) bool { return errors.Is(err, api.ErrUnavailable) })
	if n := answeredBy(stranger); n != 0 {
		t.Errorf("%d hosts answered the host with the wrong CA", n)
	}

}
