//go:build !race

package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/cluster/clusterindex"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// freePort returns a loopback port nothing listens on (right now).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// startMembers starts one in-process cluster member per (bind, advertise)
// on one in-memory provider and waits until each lists them all.
func startMembers(t *testing.T, addrs ...[2]string) []*Host {
	t.Helper()
	ms := make([]member.Config, len(addrs))
	for i, a := range addrs {
		ms[i].Bind, ms[i].Advertise = a[0], a[1]
	}
	return startMemberConfigs(t, ms...)
}

// startMemberConfigs is startMembers with each member's own settings
// (Bind, Advertise, TLS); the rest is filled in. The members start in
// parallel and leave in parallel when the test ends: protoactor-go's
// cluster sleeps a second in each start and two in each graceful leave,
// which one after the other would be most of a test's time.
func startMemberConfigs(t *testing.T, ms ...member.Config) []*Host {
	t.Helper()
	agent := test.NewInMemAgent()
	hosts := make([]*Host, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		// GossipInterval: several members in one process (member.Config).
		m.Name, m.Provider, m.TestAgent, m.GossipInterval = "reach", member.ProviderTest, agent, time.Hour
		wg.Go(func() {
			hosts[i], errs[i] = StartHost(actor.NewActorSystem(), HostConfig{
				Service: Config{BlockSize: 4, Routing: routing.DefaultConfig(), Timeout: 200 * time.Millisecond},
				Cluster: &ClusterConfig{Index: clusterindex.Config{Shards: 2}, Member: m}})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		var left sync.WaitGroup
		for _, h := range hosts {
			if h != nil {
				left.Go(func() { h.Close(); h.Leave() })
			}
		}
		left.Wait()
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hosts {
		eventually.True(t, "members list each other", func() (bool, string) {
			tp := h.Node.Member().Topology()
			return tp != nil && len(tp.Members) == len(hosts), fmt.Sprint(tp)
		})
	}
	return hosts
}

// readyWithin waits until want(h.Ready) holds, reporting the last answer.
func readyWithin(t *testing.T, h *Host, what string, want func(error) bool) error {
	t.Helper()
	var err error
	eventually.True(t, what, func() (bool, string) {
		err = h.Service.Ready(context.Background())
		return want(err), fmt.Sprint("last Ready answer ", err)
	})
	return err
}

// Several members in one process race inside protoactor-go (gRPC's global
// logger, cluster/README.md): this test runs without -race (Makefile).
//
// A member whose advertised address is closed (the silent cluster of a
// fixed --cluster-bind and a wrong --advertise) is not ready, and neither
// is the member that cannot reach it; both say why, and a healthy pair is
// ready.
func TestClusterReadinessFollowsReachability(t *testing.T) {
	t.Parallel()
	notReady := func(err error) bool { return errors.Is(err, api.ErrUnavailable) }
	closed := "127.0.0.1:" + freePort(t)
	hs := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:" + freePort(t), closed})
	good, silent := hs[0], hs[1]
	if err := readyWithin(t, silent, "the silent member", notReady); !strings.Contains(err.Error(), "advertised address "+closed+" is unreachable") {
		t.Errorf("silent member's reason: %v", err)
	}
	err := readyWithin(t, good, "the member that cannot reach it", notReady)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Reason != reasonMembersUnreachable || !strings.Contains(err.Error(), closed) {
		t.Errorf("good member's reason: %v, want %s naming %s", err, reasonMembersUnreachable, closed)
	}

	pair := startMembers(t, [2]string{"127.0.0.1:0", ""}, [2]string{"127.0.0.1:0", ""})
	for _, h := range pair {
		readyWithin(t, h, "a healthy member", func(err error) bool {
			h.Service.mu.Lock()
			answered := len(h.Service.reach.answer) == 1
			h.Service.mu.Unlock()
			return err == nil && answered
		})
	}
}
