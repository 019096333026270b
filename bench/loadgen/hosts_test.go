//go:build !race

// Several cluster members in one process: not under -race (protoactor's
// gossip shares one unsynchronized math/rand between members, see
// member.Config.GossipInterval); make test runs this file without it.

package loadgen

import (
	"context"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/cluster/clusterindex"
	"github.com/kvrouter/kvrouter/cmd/kvrouter/httpapi"
)

// TestRunHostsEndToEnd runs the harness on two router hosts (cluster
// members on loopback in this process, engines registered through each in
// turn, requests spread over both): the kvrouter replay answers every
// request and beats random routing, the sweep reaches both hosts over both
// transports without errors; memory is not measured (members wind down
// in the background).
func TestRunHostsEndToEnd(t *testing.T) {
	cfg := smallConfig(200, 200)
	cfg.Hosts, cfg.IngestWorkers = []int{2}, 0
	rep, hit := runByPolicy(t, cfg)
	kv, random := hit[NameKVRouter], hit[NameRandom]
	if kv.Hosts != 2 || kv.Shards != clusterindex.DefaultShards || !kv.Valid {
		t.Errorf("kvrouter replay on 2 hosts: %+v", kv)
	}
	if kv.HitRate <= random.HitRate {
		t.Errorf("hit rates on 2 hosts: kvrouter %.3f, random %.3f", kv.HitRate, random.HitRate)
	}
	if len(rep.Sweep) != len(cfg.Transports) {
		t.Fatalf("%d sweep points, want one per transport", len(rep.Sweep))
	}
	for _, p := range rep.Sweep {
		if p.Hosts != 2 || p.Errors != 0 || p.Latency.N != p.Requests {
			t.Errorf("sweep point %s: %d hosts, %d errors, %d of %d answered", p.Transport, p.Hosts, p.Errors, p.Latency.N, p.Requests)
		}
	}
	if len(rep.Memory) != 0 {
		t.Errorf("memory measured on a cluster in one process: %+v", rep.Memory)
	}
}

// startCluster with two hosts starts two members that see each other;
// every host knows every worker, whichever host registered it, and frees
// only the requests it routed.
func TestTwoHostsShareTheWorkers(t *testing.T) {
	r := &runner{cfg: QuickConfig()}
	c, err := startCluster(r.clusterConfig(4, layout{hosts: 2, shards: clusterindex.DefaultShards}, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if len(c.hosts) != 2 || !allJoined(c.hosts) {
		t.Fatalf("%d hosts, joined %v", len(c.hosts), len(c.hosts) == 2 && allJoined(c.hosts))
	}
	for i, h := range c.hosts {
		ws, err := h.svc.Workers(context.Background())
		if err != nil || len(ws) != 4 {
			t.Errorf("host %d knows %d workers (%v), want 4", i, len(ws), err)
		}
	}
	// Bookkeeping is per host: the host that routed a request frees it;
	// another says why it does not know it.
	ctx := context.Background()
	if _, err := c.hosts[0].svc.Route(ctx, httpapi.RouteRequest{TokenIDs: make([]uint32, 64), ModelName: benchModel, RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := c.hosts[1].svc.Free(ctx, "r"); err == nil || !strings.Contains(err.Error(), "not routed by this host") {
		t.Errorf("free on another host: %v", err)
	}
	if err := c.hosts[0].svc.Free(ctx, "r"); err != nil {
		t.Errorf("free on the routing host: %v", err)
	}
}
