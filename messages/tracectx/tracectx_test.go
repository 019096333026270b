package tracectx_test

import (
	"context"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"github.com/kvrouter/kvrouter/messages/tracectx/spantest"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

var tracer = tracectx.NewTracer("github.com/kvrouter/kvrouter/messages/tracectx_test")

var sampled = messages.TraceContext{
	TraceID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
	SpanID:  [8]byte{8, 7, 6, 5, 4, 3, 2, 1},
	Flags:   1,
}

func TestSampled(t *testing.T) {
	for _, tc := range []struct {
		name string
		tc   messages.TraceContext
		want bool
	}{
		{"zero", messages.TraceContext{}, false},
		{"sampled", sampled, true},
		{"flag off", messages.TraceContext{TraceID: sampled.TraceID, SpanID: sampled.SpanID}, false},
		{"no trace id", messages.TraceContext{SpanID: sampled.SpanID, Flags: 1}, false},
		{"no span id", messages.TraceContext{TraceID: sampled.TraceID, Flags: 1}, false},
	} {
		if got := tc.tc.Sampled(); got != tc.want {
			t.Errorf("%s: Sampled() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSpanContextRoundTrip(t *testing.T) {
	sc := tracectx.SpanContext(sampled)
	if !sc.IsValid() || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("span context %+v: want valid, sampled, remote", sc)
	}
	if sc.TraceID() != trace.TraceID(sampled.TraceID) || sc.SpanID() != trace.SpanID(sampled.SpanID) {
		t.Fatalf("ids changed: %v %v", sc.TraceID(), sc.SpanID())
	}
	if got := tracectx.FromSpanContext(sc); got != sampled {
		t.Fatalf("round trip = %+v, want %+v", got, sampled)
	}
	unsampled := sampled
	unsampled.Flags = 0
	if sc := tracectx.SpanContext(unsampled); sc.IsValid() {
		t.Errorf("unsampled context converted to a valid span context %+v", sc)
	}
	notSampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sampled.TraceID, SpanID: sampled.SpanID})
	if got := tracectx.FromSpanContext(notSampled); got != (messages.TraceContext{}) {
		t.Errorf("an unsampled span context must not be carried: %+v", got)
	}
}

func TestContextRoundTrip(t *testing.T) {
	ctx := tracectx.ContextWith(context.Background(), sampled)
	if got := tracectx.FromContext(ctx); got != sampled {
		t.Fatalf("FromContext(ContextWith(tc)) = %+v, want %+v", got, sampled)
	}
	bg := context.Background()
	if ctx := tracectx.ContextWith(bg, messages.TraceContext{}); ctx != bg {
		t.Error("a zero trace context must leave the context as it is")
	}
	if got := tracectx.FromContext(bg); got != (messages.TraceContext{}) {
		t.Errorf("FromContext(empty) = %+v, want zero", got)
	}
}

func TestNoProviderTracesNothing(t *testing.T) {
	root := tracer.Root("root")
	if root.Recording() || root.Context() != (messages.TraceContext{}) {
		t.Fatalf("root span without a provider: recording %v, context %+v", root.Recording(), root.Context())
	}
	root.SetAttributes(attribute.Int("x", 1))
	root.AddEvent("e")
	root.End()
	child := tracer.Child(sampled, "child")
	if child.Recording() || child.Context() != (messages.TraceContext{}) {
		t.Fatal("child span without a provider must be the zero Span")
	}
	child.End()
}

func TestNoProviderAllocatesNothing(t *testing.T) {
	allocs := testing.AllocsPerRun(1000, func() {
		sp := tracer.Root("batch")
		out := sp.Context()
		if sp.Recording() {
			sp.SetAttributes(tracectx.Seq.Int64(1))
		}
		sp.End()
		ch := tracer.Child(out, "normalize")
		ch.End()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch with no provider, want 0", allocs)
	}
}

func TestChildIsParented(t *testing.T) {
	exp := spantest.Install(t, nil)
	root := tracer.Root("root")
	rootTC := root.Context()
	if !rootTC.Sampled() {
		t.Fatal("root not sampled under AlwaysSample")
	}
	childTC, end := tracer.StartChild(rootTC, "child")
	end()
	root.End()
	grand := tracer.Child(childTC, "grandchild")
	grand.AddEvent("cleared", tracectx.Reason.String("restart"))
	grand.End()

	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	r, c, g := spantest.ByName(exp, "root")[0], spantest.ByName(exp, "child")[0], spantest.ByName(exp, "grandchild")[0]
	if r.Parent.IsValid() {
		t.Errorf("root has a parent %v", r.Parent)
	}
	if c.Parent.SpanID() != r.SpanContext.SpanID() || c.SpanContext.TraceID() != r.SpanContext.TraceID() {
		t.Errorf("child not parented on root: %v / %v", c.Parent, r.SpanContext)
	}
	if g.Parent.SpanID() != c.SpanContext.SpanID() || g.SpanContext.TraceID() != r.SpanContext.TraceID() {
		t.Errorf("grandchild not parented on child")
	}
	if len(g.Events) != 1 || g.Events[0].Name != "cleared" {
		t.Errorf("grandchild events %+v, want one 'cleared'", g.Events)
	}
}

func TestUnsampledRootCarriesNothing(t *testing.T) {
	exp := spantest.Install(t, sdktrace.NeverSample())
	root := tracer.Root("root")
	if root.Recording() || root.Context() != (messages.TraceContext{}) {
		t.Fatal("an unsampled root must carry a zero context")
	}
	root.End()
	tracer.Child(root.Context(), "child").End()
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported, want 0", n)
	}
}

// BenchmarkBatchSpans is the tracing cost of one batch crossing three
// stages (a root and two children), without a provider and at 1 % and
// 100 % sampling with a batching exporter that drops everything.
func BenchmarkBatchSpans(b *testing.B) {
	run := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sp := tracer.Root("batch")
			tc := sp.Context()
			sp.End()
			ch := tracer.Child(tc, "normalize")
			tc = ch.Context()
			ch.End()
			tracer.Child(tc, "coalesce").End()
		}
	}
	spantest.Sampling(b, run)
}
