package main

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The multi-process cluster tests (make test-cluster): a real etcd
// (Debian's etcd-server), `kvrouter serve --cluster` processes built from
// the repository, simulated engines in the test process. Gated by
// KVROUTER_CLUSTER_E2E=1: they need the etcd binary and take ~1 min.

const (
	e2eModel   = "e2e/model"
	e2eBlock   = 4
	e2eEngines = 6
	// e2eRecover bounds how long after a SIGKILL every /route succeeds
	// again and the index equals the engines' caches: etcd's lease (3 s)
	// expires, the survivors' topology changes, the lost streams' new
	// owners resync them from the replay buffers and the lost shards
	// re-activate and rebuild.
	e2eRecover = 30 * time.Second
)

// TestClusterHostLoss: three hosts on etcd, six engines registered through
// different hosts (one with a replay buffer too small for its history).
// Every host answers /query identically and its index equals the engines'
// caches. One host is killed with SIGKILL: within e2eRecover every /route
// on the survivors succeeds and, traffic going on, the index on every
// survivor equals the engines' caches again (no phantom block; missing
// ones only on a stream flagged degraded) and every survivor answers
// /query identically.
func TestClusterHostLoss(t *testing.T) {
	c := newE2ECluster(t, 3)
	c.checkConverged(t, "three hosts", c.hosts)
	followers := c.checkOneFollower(t, c.hosts)
	// A request routed by one host is booked there; prefill_done and free
	// reach it through the others.
	prompt := c.engines[0].prompts[0]
	if _, err := c.hosts[0].post("/route", map[string]any{"token_ids": prompt, "model_name": e2eModel, "request_id": "across"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.hosts[1].post("/route/across/prefill_done", nil); err != nil {
		t.Errorf("prefill_done through another host: %v", err)
	}
	if _, err := c.hosts[2].post("/route/across/free", nil); err != nil {
		t.Errorf("free through another host: %v", err)
	}
	if _, err := c.hosts[1].post("/route/across/free", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("second free: %v, want 404", err)
	}
	v := 0 // the host following the most streams
	for i := range c.hosts {
		if len(followers[i]) > len(followers[v]) {
			v = i
		}
	}
	victim := c.hosts[v]
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()
	killed := time.Now()
	survivors := slices.Delete(slices.Clone(c.hosts), v, v+1)
	c.serve(t, 5) // traffic goes on while the streams and slices move
	c.eventually(t, "every /route on the survivors succeeds", e2eRecover, func() error {
		for _, h := range survivors {
			for _, e := range c.engines {
				if _, err := h.post("/route", map[string]any{"token_ids": e.prompts[len(e.prompts)-1], "model_name": e2eModel}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	t.Logf("every /route succeeds %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	c.serve(t, 5)
	c.checkConverged(t, "after the host loss", survivors)
	t.Logf("index equal to the engines' caches %v after the SIGKILL (the lost host followed streams %v)",
		time.Since(killed).Round(time.Millisecond), followers[v])
	c.checkOneFollower(t, survivors)
}

// TestClusterHostJoins: a fourth host joins a converged three-host
// cluster: shards and streams move to it, and nothing is lost — every
// host's index equals the engines' caches and all four answer alike.
func TestClusterHostJoins(t *testing.T) {
	c := newE2ECluster(t, 3)
	c.checkConverged(t, "three hosts", c.hosts)
	c.addHost(t)
	c.serve(t, 5)
	c.checkConverged(t, "after a fourth host joined", c.hosts)
	c.checkOneFollower(t, c.hosts)
}

// checkOneFollower checks, from the hosts' logs, that each engine's stream
// is followed by exactly one of hosts (the last thing each host logged
// about the stream: following it, or handing it over), and returns the
// streams each host follows.
func (c *e2eCluster) checkOneFollower(t *testing.T, hosts []*e2eHost) [][]int {
	t.Helper()
	out := make([][]int, len(hosts))
	for i, h := range hosts {
		following := map[int]bool{}
		for _, line := range strings.Split(h.log.String(), "\n") {
			w, err := strconv.Atoi(field(line, "worker"))
			switch {
			case err != nil:
			case strings.Contains(line, `msg="cluster: following a stream"`):
				following[w] = true
			case strings.Contains(line, `msg="cluster: stream handed over to its new owner"`):
				following[w] = false
			}
		}
		for w, on := range following {
			if on {
				out[i] = append(out[i], w)
			}
		}
		slices.Sort(out[i])
	}
	for _, e := range c.engines {
		n := 0
		for i := range hosts {
			if slices.Contains(out[i], e.id) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("stream of worker %d followed by %d hosts (%v)", e.id, n, out)
		}
	}
	return out
}
