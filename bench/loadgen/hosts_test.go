//go:build !race

// Several cluster members in one process: not under -race (protoactor's
// gossip shares one unsynchronized math/rand between members, see
// member.Config.GossipInterval); make test runs this file without it.

package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/cluster/clusterindex"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
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
// every host knows every worker, whichever host registered it, takes
// prefill_done and free for requests the other routed, and scores with the
// load the other booked.
func TestTwoHostsShareTheWorkers(t *testing.T) {
	r := &runner{cfg: QuickConfig()}
	c, err := startCluster(r.clusterConfig(4, layout{hosts: 2, shards: clusterindex.DefaultShards}, 1, true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if len(c.hosts) != 2 || !allJoined(c.hosts) {
		t.Fatalf("%d hosts, joined %v", len(c.hosts), len(c.hosts) == 2 && allJoined(c.hosts))
	}
	for i, h := range c.hosts {
		ws, err := h.Service.Workers(context.Background())
		if err != nil || len(ws) != 4 {
			t.Errorf("host %d knows %d workers (%v), want 4", i, len(ws), err)
		}
	}
	// Bookkeeping is per host: the host that routed a request books it;
	// the load reaches the other host's scores, and leaves them when the
	// request is freed — through either host.
	ctx := context.Background()
	routed, err := c.hosts[0].Service.Route(ctx, api.RouteRequest{TokenIDs: make([]uint32, 64), ModelName: benchModel, RequestID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	seenBy1 := func(blocks uint64) func() (bool, string) {
		n := 0
		return func() (bool, string) {
			n++
			id := "probe" + strconv.Itoa(n)
			res, err := c.hosts[1].Service.Route(ctx, api.RouteRequest{TokenIDs: []uint32{1}, ModelName: benchModel, RequestID: id, IncludeScores: true})
			if err != nil {
				return false, err.Error()
			}
			_ = c.hosts[1].Service.Free(ctx, id)
			for _, sc := range res.Scores {
				if sc.WorkerID == routed.WorkerID {
					return sc.ActiveDecodeBlocks == blocks, fmt.Sprintf("%+v", sc)
				}
			}
			return false, fmt.Sprintf("no score for worker %d", routed.WorkerID)
		}
	}
	eventually.True(t, "host 1 sees host 0's booking", seenBy1(4)) // 64 tokens: 4 blocks of 16
	// prefill_done and free reach the routing host from the other one.
	if err := c.hosts[1].Service.PrefillDone(ctx, "r"); err != nil {
		t.Errorf("prefill_done through host 1: %v", err)
	}
	if err := c.hosts[1].Service.Free(ctx, "r"); err != nil {
		t.Errorf("free through host 1: %v", err)
	}
	if err := c.hosts[0].Service.Free(ctx, "r"); err == nil || !strings.Contains(err.Error(), "not routed by any host") {
		t.Errorf("second free: %v, want unknown on every host", err)
	}
	eventually.True(t, "host 1 sees the free", seenBy1(0))
}
