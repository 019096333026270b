package service

import (
	"context"
	"io"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/telemetry"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
)

// Spans of the route path recorded here; the index shards record
// indexer.SpanLookup and the route actor routing.SpanDecide, all children
// of the HTTP server's span.
const (
	SpanHash          = "kvrouter.route.hash"           // hashing the prompt's tokens into blocks
	SpanSessionCredit = "kvrouter.route.session_credit" // asking the session index (session_id given)
)

var (
	tracer    = tracectx.NewTracer("github.com/kvrouter/kvrouter/actors/service")
	tokensKey = attribute.Key("kvrouter.tokens")
	blocksKey = attribute.Key("kvrouter.blocks")
)

// Pipelines returns every namespace's ingest pipeline, sorted by model and
// tenant: the service is the telemetry.Source of kvrouter serve's metrics.
func (s *Service) Pipelines() []telemetry.Pipeline {
	spaces := s.sortedSpaces()
	out := make([]telemetry.Pipeline, len(spaces))
	for i, ns := range spaces {
		out[i] = ns.pipe
	}
	return out
}

var _ telemetry.Source = (*Service)(nil)

// Handler returns the HTTP API over the service as kvrouter serve runs it:
// every answered /route is recorded in m (duration, cached-token ratio),
// and GET /metrics serves m together with the HTTP server's own counters
// (httpapi's WriteMetrics, parsed into the same exposition, so content
// negotiation and the text format stay the exporter's), the unreachable
// cluster members, the load deltas exchanged with them, kvrouter_worker_info
// (fleet.go), the booked load and the index blocks per stream and
// namespace (fleetmetrics.go), the pending selections per namespace
// (pendingmetrics.go), the disaggregation decisions (roles.go). opts.MetricsHandler
// is replaced; each of more writes further metrics in the text format
// (the prompt resolver's and the parity guard's).
func (s *Service) Handler(m *telemetry.Metrics, opts httpapi.Options, more ...func(io.Writer) error) *httpapi.Handler {
	var h *httpapi.Handler
	opts.MetricsHandler = m.Handler(append([]func(io.Writer) error{func(w io.Writer) error { return h.WriteMetrics(w) },
		s.UnreachableMembers, s.LoadDeltaMetrics, s.WriteSignalMetrics, s.WriteHitMetrics, s.WorkerInfo, s.BookedLoads, s.IndexBlocks, s.PendingSelections, s.DisaggDecisions}, more...)...)
	h = httpapi.New(metered{s, m}, opts)
	return h
}

// metered is the Service with Route recorded.
type metered struct {
	*Service
	metrics *telemetry.Metrics
}

// Route implements api.Backend.
func (b metered) Route(ctx context.Context, req api.RouteRequest) (api.RouteResult, error) {
	start := time.Now()
	out, isl, err := b.route(ctx, req)
	if err == nil {
		b.metrics.RecordRoute(ctx, time.Since(start), int(out.CachedTokens), isl)
	}
	return out, err
}
