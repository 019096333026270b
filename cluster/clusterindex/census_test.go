package clusterindex

import (
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// TestCensus: a round is done when every member claimed and, when
// recovering, every claimed stream was re-fed (a re-feed may arrive before
// its claim); held workers nobody claims are orphans; inexact re-feeds
// count degraded; a claim saying the member hosts another activation is
// remembered; a member absent from a later topology is noticed.
func TestCensus(t *testing.T) {
	k := func(w messages.WorkerID) messages.WorkerKey { return messages.WorkerKey{Worker: w} }
	c := newCensus(1, true, []string{"b:1", "a:1"}, []messages.WorkerID{7, 3, 3, 9})
	if got := c.asking(); !slices.Equal(got, []string{"a:1", "b:1"}) || c.done() {
		t.Fatalf("asking %v done %v", got, c.done())
	}
	c.fed(k(5), true) // before b's claim
	c.claim("a:1", []messages.WorkerKey{k(3), k(4)}, false)
	c.claim("a:1", []messages.WorkerKey{k(8)}, true) // a repeated claim is ignored
	c.claim("z:1", []messages.WorkerKey{k(7)}, true) // not asked
	c.claim("b:1", []messages.WorkerKey{k(5)}, false)
	if c.done() || c.hosting {
		t.Fatalf("done %v hosting %v: streams 3 and 4 not re-fed, no member asked hosts the shard", c.done(), c.hosting)
	}
	c.fed(k(3), false)
	c.fed(k(4), true)
	if !c.done() || c.degraded() != 1 {
		t.Fatalf("done %v degraded %d, want done, 1", c.done(), c.degraded())
	}
	if got := c.orphans(); !slices.Equal(got, []messages.WorkerID{7, 9}) {
		t.Fatalf("orphans %v, want [7 9]", got)
	}
	if c.lost([]string{"a:1", "b:1", "c:1"}) || !c.lost([]string{"a:1"}) {
		t.Fatal("lost: a joining member is no loss; a missing one is")
	}
	check := newCensus(2, false, []string{"a:1"}, nil)
	check.claim("a:1", []messages.WorkerKey{k(1)}, true)
	if !check.done() || !check.hosting {
		t.Fatal("a round that is not recovering waits for claims only; a:1 hosts another activation")
	}
}
