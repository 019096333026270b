package clusterindex

import (
	"testing"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
)

// A traced batch and a traced query crossing the cluster (protobuf, a
// grain) keep their traces: the grain's apply span is the batch span's
// child, and every shard grain the query reaches records a lookup span
// under the route's span.
func TestTracesCrossTheCluster(t *testing.T) {
	checkTraces(t, startMembers(t, "ci-trace", NewNode(Config{}).Join))
}

// checkTraces sends a traced batch and a traced query through the first
// of ms and checks the grains' spans (members_test.go runs it across two
// members).
func checkTraces(t *testing.T, ms []*member.Member) {
	t.Helper()
	exp := spantest.Install(t, nil)
	x := Spawn(ms[0], namespace, Config{Shards: 3, QueryDeadline: wait})
	defer x.Stop()
	if err := x.Create(wait); err != nil {
		t.Fatal(err)
	}
	tr := tracectx.NewTracer("test")
	batch := tr.Root("kvrouter.coalesce")
	ms[0].Cluster.ActorSystem.Root.Send(x.PID(), &messages.RouterEventBatch{Trace: batch.Context(),
		Events: []messages.RouterEvent{newStreams(3).next(2)}})
	batch.End()
	if _, err := x.Snapshot(wait); err != nil { // ordered: the batch is applied
		t.Fatal(err)
	}
	route := tr.Root("POST /route")
	if ans := x.Query(&indexer.QueryRequest{Hashes: []messages.LocalHash{1}, Trace: route.Context()}, 0); ans.Partial() {
		t.Fatalf("partial answer %+v", ans)
	}
	route.End()

	applies := spantest.ByName(exp, indexer.SpanApply)
	if len(applies) != 1 || applies[0].Parent.SpanID() != batch.Context().SpanID {
		t.Fatalf("apply spans %d (parent %v), want 1 under the batch's span", len(applies), applies)
	}
	lookups := spantest.ByName(exp, indexer.SpanLookup)
	if len(lookups) != 3 {
		t.Fatalf("%d lookup spans, want one per shard grain (3)", len(lookups))
	}
	for _, l := range lookups {
		if l.Parent.TraceID() != route.Context().TraceID || l.Parent.SpanID() != route.Context().SpanID {
			t.Fatalf("lookup span's parent %v, want the route's span", l.Parent)
		}
	}
}
