package service

import (
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// reachGrace is how long a listed member may go without answering this
// one before this member stops saying it is ready: several load snapshots
// (stateEvery) in a row, so one slow answer does not flap /readyz.
const reachGrace = 3 * time.Second

// reachability remembers, per other cluster member, when it last answered
// this member (a load snapshot, every stateEvery) and when it was first
// listed. It is a plain value owned by the state loop and read under
// Service.mu.
type reachability struct {
	seen   map[string]time.Time // first listed
	answer map[string]time.Time // last answered
}

// observe records one round of asks: the members the provider lists and
// whether each answered.
func (r *reachability) observe(now time.Time, answered map[string]bool) {
	if r.seen == nil {
		r.seen, r.answer = map[string]time.Time{}, map[string]time.Time{}
	}
	for m, ok := range answered {
		if _, known := r.seen[m]; !known {
			r.seen[m] = now
		}
		if ok {
			r.answer[m] = now
		}
	}
	for m := range r.seen { // members no longer listed are forgotten
		if _, listed := answered[m]; !listed {
			delete(r.seen, m)
			delete(r.answer, m)
		}
	}
}

// unreachable lists, sorted, the members that have not answered within
// grace: never since they were first listed grace ago, or not for grace.
func (r *reachability) unreachable(now time.Time, grace time.Duration) []string {
	var out []string
	for m, first := range r.seen {
		last, ok := r.answer[m]
		if (!ok && now.Sub(first) >= grace) || (ok && now.Sub(last) >= grace) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// reasonMembersUnreachable is /readyz's reason while this member cannot
// exchange messages with the cluster.
const reasonMembersUnreachable = "members_unreachable"

// selfDialTimeout bounds the check that this member's advertised address
// accepts connections.
const selfDialTimeout = 500 * time.Millisecond

// clusterNotReady says why this cluster member is not ready ("" when it
// is, and on one host).
func (s *Service) clusterNotReady() string {
	c := s.cfg.Cluster
	if c == nil {
		return ""
	}
	self := c.Self()
	var selfErr error
	if self != "" {
		var conn net.Conn
		if conn, selfErr = net.DialTimeout("tcp", self, selfDialTimeout); selfErr == nil {
			conn.Close()
		}
	}
	s.mu.Lock()
	unreachable := s.reach.unreachable(time.Now(), reachGrace)
	s.mu.Unlock()
	return notReadyReason(self, selfErr, unreachable, reachGrace)
}

// UnreachableMembers writes the kvrouter_cluster_unreachable_members gauge
// (Prometheus text): the listed members that have not answered this one
// within the grace, 0 on one host.
func (s *Service) UnreachableMembers(w io.Writer) error {
	s.mu.Lock()
	n := len(s.reach.unreachable(time.Now(), reachGrace))
	s.mu.Unlock()
	_, err := fmt.Fprintf(w, "# HELP kvrouter_cluster_unreachable_members Cluster members the provider lists that have not answered this member for %v.\n"+
		"# TYPE kvrouter_cluster_unreachable_members gauge\nkvrouter_cluster_unreachable_members %d\n", reachGrace, n)
	return err
}

// notReadyReason says why a cluster member is not ready ("" when it is):
// its own advertised address refuses connections (selfErr), or listed
// members have not answered it.
func notReadyReason(self string, selfErr error, unreachable []string, grace time.Duration) string {
	var parts []string
	if selfErr != nil {
		parts = append(parts, fmt.Sprintf("this member's advertised address %s is unreachable (%v): other members cannot answer it", self, selfErr))
	}
	if len(unreachable) > 0 {
		parts = append(parts, fmt.Sprintf("cannot exchange messages with members %s (no answer for %v)", strings.Join(unreachable, ", "), grace))
	}
	return strings.Join(parts, "; ")
}
