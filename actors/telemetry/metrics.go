package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/mailbox"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// DefaultReadTimeout bounds each actor request of a scrape.
const DefaultReadTimeout = 250 * time.Millisecond

// Route latency buckets (seconds): the route path answers in tens to
// hundreds of microseconds; its deadline is tens of milliseconds.
var routeBuckets = []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3}

// Cached-token ratio buckets.
var ratioBuckets = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// Metrics are kvrouter's metrics: an OpenTelemetry MeterProvider exported
// by the Prometheus exporter on a registry of its own (Handler serves it).
// Ingest figures are read from a Source at each scrape; the route path
// records into RecordRoute. Prometheus names (the exporter adds the unit
// and _total suffixes):
//
//	kvrouter_events_total{worker,dp_rank,kind,outcome,reason}  normalizer outcomes
//	kvrouter_dropped_hints_total{worker,dp_rank,reason}        unusable optional fields left out of kept events (wire.Hint)
//	kvrouter_batches_total{worker,dp_rank}                     batches delivered by the listener
//	kvrouter_seq_gaps_total{worker,dp_rank}                    forward seq gaps seen live
//	kvrouter_replays_total{worker,dp_rank,result}              replays: ok, timeout, error
//	kvrouter_resyncs_total{worker,dp_rank,reason}              index state dropped, by why
//	kvrouter_recoveries_total{worker,dp_rank}                  rebuilds from the replay buffer after a lost batch
//	kvrouter_history_lost_batches_total{worker,dp_rank}        batches not applied whole (state dropped, degraded)
//	kvrouter_dropped_messages_total{worker,dp_rank,reason}     messages a listener dropped before sequencing
//	kvrouter_engine_contradictions_total{worker,dp_rank,engine} batches showing what the registered engine never sends
//	kvrouter_mailbox_depth{actor}                              messages queued per actor kind (actors/mailbox)
//	kvrouter_route_expired_total{stage}                        route requests shed past their deadline (actors/expiry)
//	kvrouter_stream_lag_seconds{worker,dp_rank}                listener → coalescer, last batch
//	kvrouter_worker_state{worker,dp_rank,state}                1 for the current state, else 0
//	kvrouter_index_blocks{shard}                               tree blocks per index shard
//	kvrouter_index_stored_blocks_total{shard}                  blocks of the stored events each shard applied
//	kvrouter_route_duration_seconds                            histogram
//	kvrouter_route_cached_tokens_ratio                         histogram: cached / prompt tokens
//	kvrouter_sessions                                          sessions whose lineage is held
//	kvrouter_session_lineages, kvrouter_session_blocks         (stream, session) lineages; their blocks
//	kvrouter_session_events_total{reason}                      stored events the session index flagged
//	kvrouter_sessions_dropped_total{reason}                    evicted, expired
//	kvrouter_session_lineages_dropped_total{reason}            holder_dropped, cleared
//	kvrouter_session_blocks_dropped_total{reason}              depth_dropped, pruned
//	kvrouter_telemetry_read_errors_total                       scrape requests that failed
//	go_*, process_*                                            Go runtime and process (client_golang's collectors)
//
// Session figures are summed over namespaces; reasons are
// sessions.Reason's labels.
type Metrics struct {
	provider      *sdkmetric.MeterProvider
	registry      *prometheus.Registry
	src           Source
	timeout       time.Duration
	readErrors    atomic.Int64
	routeDuration metric.Float64Histogram
	cachedRatio   metric.Float64Histogram
}

// NewMetrics builds the metrics; src is read at each scrape, each actor
// request bounded by timeout (0: DefaultReadTimeout).
func NewMetrics(src Source, timeout time.Duration) (*Metrics, error) {
	if timeout <= 0 {
		timeout = DefaultReadTimeout
	}
	reg := prometheus.NewRegistry()
	// The standard go_* (goroutines, GC, heap) and process_* (RSS, CPU, open
	// fds) series every Go service exposes, beside kvrouter's own.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo(),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	m := &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		registry: reg,
		src:      src,
		timeout:  timeout,
	}
	if err := m.instruments(m.provider.Meter("github.com/kvrouter/kvrouter")); err != nil {
		return nil, err
	}
	return m, nil
}

// Handler serves the metrics in the Prometheus exposition formats (for
// /metrics). Each of text, when given, writes more metrics in the text
// format — httpapi's WriteMetrics, the HTTP server's own counters — which
// are parsed at each scrape and served with these. A writer that fails (or
// defines a name twice) costs its own metrics, not the scrape.
func (m *Metrics) Handler(text ...func(io.Writer) error) http.Handler {
	g := prometheus.Gatherers{m.registry}
	for _, t := range text {
		g = append(g, textGatherer(t))
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// RecordRoute records one answered route request: its duration and the
// share of its prompt tokens the chosen worker had cached.
func (m *Metrics) RecordRoute(ctx context.Context, d time.Duration, cachedTokens, promptTokens int) {
	m.routeDuration.Record(ctx, d.Seconds())
	if promptTokens > 0 {
		m.cachedRatio.Record(ctx, float64(cachedTokens)/float64(promptTokens))
	}
}

// Meter is a meter of the same provider, for the instruments a front end
// records itself (the proxy's latency histograms); scope names the
// instrumenting package.
func (m *Metrics) Meter(scope string) metric.Meter { return m.provider.Meter(scope) }

// Shutdown stops the MeterProvider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// observed are the asynchronous instruments fed by one read of the Source.
type observed struct {
	events, hints, batches, gaps, replays, resyncs, recoveries, lost, dropped, refused, readErrors, contradictions, expired, stored metric.Int64ObservableCounter
	sessionReasons                                                                                                                  [unitCount]metric.Int64ObservableCounter
	state, blocks, sessions, lineages, sessionBlocks, mailboxes                                                                     metric.Int64ObservableGauge
	lag                                                                                                                             metric.Float64ObservableGauge
}

func (m *Metrics) instruments(meter metric.Meter) error {
	var o observed
	var errs []error
	var err error
	keep := func() { errs = append(errs, err) }
	o.events, err = meter.Int64ObservableCounter("kvrouter.events",
		metric.WithDescription("Engine events by outcome: accepted (by kind) or rejected (by reason)."))
	keep()
	o.hints, err = meter.Int64ObservableCounter("kvrouter.dropped_hints",
		metric.WithDescription("Unusable optional event fields (session id, ownership, …) left out of events that were kept, by reason."))
	keep()
	o.batches, err = meter.Int64ObservableCounter("kvrouter.batches",
		metric.WithDescription("Engine batches delivered by the listener, in order."))
	keep()
	o.gaps, err = meter.Int64ObservableCounter("kvrouter.seq_gaps",
		metric.WithDescription("Live batches that skipped ahead of the next expected seq."))
	keep()
	o.replays, err = meter.Int64ObservableCounter("kvrouter.replays",
		metric.WithDescription("Replay requests to engines' replay endpoints, by result."))
	keep()
	o.resyncs, err = meter.Int64ObservableCounter("kvrouter.resyncs",
		metric.WithDescription("Times a stream's index state was dropped, by reason."))
	keep()
	o.recoveries, err = meter.Int64ObservableCounter("kvrouter.recoveries",
		metric.WithDescription("Streams rebuilt from the engine's replay buffer after a batch the pipeline could not apply."))
	keep()
	o.dropped, err = meter.Int64ObservableCounter("kvrouter.dropped_messages",
		metric.WithDescription("Messages a listener dropped before sequencing them (malformed frames, topics, socket errors), by reason."))
	keep()
	o.refused, err = meter.Int64ObservableCounter("kvrouter.shared_socket.refused_messages",
		metric.WithDescription("Messages a socket shared by topic dropped before they reached a pod's stream (a topic outside kv@<pod>@<model>, a pod no registration names, a pod past the cap), by endpoint and reason."))
	keep()
	o.contradictions, err = meter.Int64ObservableCounter("kvrouter.engine.contradictions",
		metric.WithDescription("Batches showing what the stream's registered engine never sends (a timestamp seq, a layout): decoded as registered, check the registration."))
	keep()
	o.mailboxes, err = meter.Int64ObservableGauge("kvrouter.mailbox_depth",
		metric.WithDescription("Messages posted to an actor kind's mailboxes and not yet handled."))
	keep()
	o.expired, err = meter.Int64ObservableCounter("kvrouter.route.expired",
		metric.WithDescription("Route requests a stage of the route path took past their deadline and answered expired without working on them, by stage (shard, route, session)."))
	keep()
	o.lost, err = meter.Int64ObservableCounter("kvrouter.history_lost_batches",
		metric.WithDescription("Batches the pipeline could not apply whole: the stream's state was dropped and flagged degraded."))
	keep()
	for u, c := range [unitCount]struct{ name, desc string }{
		unitEvents:   {"kvrouter.session.events", "Stored events the session index flagged, by reason."},
		unitSessions: {"kvrouter.sessions.dropped", "Sessions the session index dropped, by reason."},
		unitLineages: {"kvrouter.session.lineages.dropped", "Session lineages dropped, by reason."},
		unitBlocks:   {"kvrouter.session.blocks.dropped", "Session lineage blocks dropped, by reason."},
	} {
		o.sessionReasons[u], err = meter.Int64ObservableCounter(c.name, metric.WithDescription(c.desc))
		keep()
	}
	o.sessions, err = meter.Int64ObservableGauge("kvrouter.sessions",
		metric.WithDescription("Sessions whose lineage the session indexes hold."))
	keep()
	o.lineages, err = meter.Int64ObservableGauge("kvrouter.session.lineages",
		metric.WithDescription("(worker, dp_rank, session) lineages the session indexes hold."))
	keep()
	o.sessionBlocks, err = meter.Int64ObservableGauge("kvrouter.session.blocks",
		metric.WithDescription("Blocks of the lineages the session indexes hold."))
	keep()
	o.readErrors, err = meter.Int64ObservableCounter("kvrouter.telemetry.read_errors",
		metric.WithDescription("Actor requests of a scrape that failed (their figures were left out)."))
	keep()
	o.state, err = meter.Int64ObservableGauge("kvrouter.worker_state",
		metric.WithDescription("1 for a stream's current state (exact, recovering, degraded), 0 for the others."))
	keep()
	o.blocks, err = meter.Int64ObservableGauge("kvrouter.index.blocks",
		metric.WithDescription("Blocks held by each index shard."))
	keep()
	o.stored, err = meter.Int64ObservableCounter("kvrouter.index.stored_blocks",
		metric.WithDescription("Blocks of the stored events each index shard applied (held before or not)."))
	keep()
	o.lag, err = meter.Float64ObservableGauge("kvrouter.stream.lag", metric.WithUnit("s"),
		metric.WithDescription("Time the stream's last batch took from its listener to its coalescer."))
	keep()
	m.routeDuration, err = meter.Float64Histogram("kvrouter.route.duration", metric.WithUnit("s"),
		metric.WithDescription("Route request duration."), metric.WithExplicitBucketBoundaries(routeBuckets...))
	keep()
	m.cachedRatio, err = meter.Float64Histogram("kvrouter.route.cached_tokens_ratio",
		metric.WithDescription("Share of a routed prompt's tokens cached on the chosen worker."),
		metric.WithExplicitBucketBoundaries(ratioBuckets...))
	keep()
	_, err = meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		m.observe(obs, &o)
		return nil
	}, o.events, o.hints, o.batches, o.gaps, o.replays, o.resyncs, o.recoveries, o.lost, o.dropped, o.refused, o.contradictions, o.expired, o.mailboxes, o.readErrors, o.state, o.blocks, o.stored, o.lag,
		o.sessionReasons[unitEvents], o.sessionReasons[unitSessions], o.sessionReasons[unitLineages],
		o.sessionReasons[unitBlocks], o.sessions, o.lineages, o.sessionBlocks)
	keep()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// observe reads the Source and reports every figure.
func (m *Metrics) observe(obs metric.Observer, o *observed) {
	r := read(m.src.Pipelines(), m.timeout)
	m.readErrors.Add(int64(r.errors))
	ints := func(inst metric.Int64Observable, s series) {
		for _, p := range s {
			obs.ObserveInt64(inst, int64(p.v), metric.WithAttributeSet(p.set))
		}
	}
	ints(o.events, r.events)
	ints(o.hints, r.hints)
	ints(o.batches, r.batches)
	ints(o.gaps, r.gaps)
	ints(o.replays, r.replays)
	ints(o.resyncs, r.resyncs)
	ints(o.recoveries, r.recoveries)
	ints(o.lost, r.lost)
	ints(o.dropped, r.dropped)
	ints(o.refused, r.refused)
	ints(o.contradictions, r.contradictions)
	for _, d := range mailbox.Depths() {
		obs.ObserveInt64(o.mailboxes, d.Len, metric.WithAttributes(labelActor.String(d.Kind)))
	}
	for _, e := range expiry.Counts() {
		obs.ObserveInt64(o.expired, int64(e.N), metric.WithAttributes(labelStage.String(e.Stage.String())))
	}
	for u, s := range r.sessions.reasons {
		ints(o.sessionReasons[u], s)
	}
	obs.ObserveInt64(o.sessions, int64(r.sessions.held))
	obs.ObserveInt64(o.lineages, int64(r.sessions.lineages))
	obs.ObserveInt64(o.sessionBlocks, int64(r.sessions.blocks))
	ints(o.state, r.state)
	ints(o.blocks, r.blocks)
	ints(o.stored, r.stored)
	for _, p := range r.lag {
		obs.ObserveFloat64(o.lag, p.v, metric.WithAttributeSet(p.set))
	}
	obs.ObserveInt64(o.readErrors, m.readErrors.Load())
}
