package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/proxy/pdtransfer"
	"github.com/kvrouter/kvrouter/messages"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Latency buckets (seconds): a first token comes after a prefill of
// milliseconds to seconds; tokens follow every few to hundreds of ms.
var (
	ttftBuckets = []float64{1e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10, 30, 60}
	itlBuckets  = []float64{100e-6, 500e-6, 1e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1}
	e2eBuckets  = []float64{5e-3, 25e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// metrics are the proxy's instruments (Prometheus names, as the telemetry
// exporter writes them):
//
//	kvrouter_proxy_time_to_first_token_seconds{worker,dp_rank}   histogram: request in → first answer byte out
//	kvrouter_proxy_inter_token_latency_seconds{worker,dp_rank}   histogram: between streamed chunks
//	kvrouter_proxy_request_duration_seconds{worker,dp_rank,status} histogram: whole answers
//	kvrouter_proxy_errors_total{worker,dp_rank,reason}           connect_failed, no_engine, engine_died, idle_timeout, canceled
//	kvrouter_proxy_refused_total{reason}                         requests answered before any engine (auth, body, routing)
type metrics struct {
	ttft, itl, e2e  metric.Float64Histogram
	errors, refusal metric.Int64Counter
	disagg          disaggMetrics
}

func newMetrics(m metric.Meter) (*metrics, error) {
	var out metrics
	var errs []error
	var err error
	out.ttft, err = m.Float64Histogram("kvrouter.proxy.time_to_first_token", metric.WithUnit("s"),
		metric.WithDescription("Time from a request's arrival to the first answer byte sent to the client."),
		metric.WithExplicitBucketBoundaries(ttftBuckets...))
	errs = append(errs, err)
	out.itl, err = m.Float64Histogram("kvrouter.proxy.inter_token_latency", metric.WithUnit("s"),
		metric.WithDescription("Time between two chunks of a streamed answer."), metric.WithExplicitBucketBoundaries(itlBuckets...))
	errs = append(errs, err)
	out.e2e, err = m.Float64Histogram("kvrouter.proxy.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a request's arrival to the end of its answer."), metric.WithExplicitBucketBoundaries(e2eBuckets...))
	errs = append(errs, err)
	out.errors, err = m.Int64Counter("kvrouter.proxy.errors", metric.WithDescription("Forwarded requests that failed, by worker and reason."))
	errs = append(errs, err)
	out.refusal, err = m.Int64Counter("kvrouter.proxy.refused", metric.WithDescription("Requests the proxy answered itself, by reason."))
	errs = append(errs, err)
	out.disagg, err = newDisaggMetrics(m)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("proxy metrics: %w", err)
	}
	return &out, nil
}

func workerAttrs(k messages.WorkerKey, more ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{workerKey.Int64(int64(k.Worker)), dpRankKey.Int64(int64(k.DpRank))}, more...)...)
}

// The metrics' labels: worker and dp_rank as every other per-rank series
// on /metrics names them (actors/telemetry), not the spans' attribute
// names (tracectx.Worker would be exported as kvrouter_worker_id).
var (
	workerKey = attribute.Key("worker")
	dpRankKey = attribute.Key("dp_rank")
	reasonKey = attribute.Key("reason")
	statusKey = attribute.Key("status")
)

func (m *metrics) firstToken(ctx context.Context, k messages.WorkerKey, d time.Duration) {
	m.ttft.Record(ctx, d.Seconds(), workerAttrs(k))
}

func (m *metrics) interToken(ctx context.Context, k messages.WorkerKey, d time.Duration) {
	m.itl.Record(ctx, d.Seconds(), workerAttrs(k))
}

func (m *metrics) done(ctx context.Context, k messages.WorkerKey, status int, d time.Duration) {
	m.e2e.Record(ctx, d.Seconds(), workerAttrs(k, statusKey.Int(status)))
}

func (m *metrics) failed(ctx context.Context, k messages.WorkerKey, reason string) {
	m.errors.Add(ctx, 1, workerAttrs(k, reasonKey.String(reason)))
}

func (m *metrics) refused(ctx context.Context, reason string) {
	m.refusal.Add(ctx, 1, metric.WithAttributes(reasonKey.String(reason)))
}

// disaggMetrics are the instruments of split requests:
//
//	kvrouter_proxy_prefill_legs_total{protocol,outcome}        prefill legs sent, by outcome (disagg.go's Prefill* values)
//	kvrouter_proxy_prefill_leg_duration_seconds{protocol}      histogram: a prefill leg's send to its whole answer
//	kvrouter_proxy_prefill_fallbacks_total{protocol,reason,action} split requests served without their remote prefill:
//	                                                           action local (the decode worker prefilled) or failed (502)
//	kvrouter_proxy_client_transfer_fields_total{field}         transfer fields removed from clients' bodies
//	kvrouter_proxy_prefill_retries_total{protocol,reason}      prefill legs retried on the alternate prefill worker, by the failure
type disaggMetrics struct {
	legs, fallbacks, fields, retries metric.Int64Counter
	legTime                          metric.Float64Histogram
}

func newDisaggMetrics(m metric.Meter) (disaggMetrics, error) {
	var out disaggMetrics
	var errs [5]error
	out.legs, errs[0] = m.Int64Counter("kvrouter.proxy.prefill_legs", metric.WithDescription("Prefill legs of split requests, by transfer protocol and outcome."))
	out.legTime, errs[1] = m.Float64Histogram("kvrouter.proxy.prefill_leg.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from sending a prefill leg to its whole answer."), metric.WithExplicitBucketBoundaries(ttftBuckets...))
	out.fallbacks, errs[2] = m.Int64Counter("kvrouter.proxy.prefill_fallbacks",
		metric.WithDescription("Split requests served without their remote prefill, by reason: locally on the decode worker, or failed."))
	out.fields, errs[3] = m.Int64Counter("kvrouter.proxy.client_transfer_fields",
		metric.WithDescription("KV transfer fields removed from clients' request bodies, by field."))
	out.retries, errs[4] = m.Int64Counter("kvrouter.proxy.prefill_retries",
		metric.WithDescription("Prefill legs of split requests retried on the alternate prefill worker, by what the failed leg got."))
	return out, errors.Join(errs[:]...)
}

var (
	protocolKey = attribute.Key("protocol")
	outcomeKey  = attribute.Key("outcome")
	actionKey   = attribute.Key("action")
	fieldKey    = attribute.Key("field")
)

func (m *metrics) prefillDone(ctx context.Context, proto pdtransfer.Protocol, outcome string, d time.Duration) {
	m.disagg.legs.Add(ctx, 1, metric.WithAttributes(protocolKey.String(string(proto)), outcomeKey.String(outcome)))
	m.disagg.legTime.Record(ctx, d.Seconds(), metric.WithAttributes(protocolKey.String(string(proto))))
}

func (m *metrics) fallback(ctx context.Context, proto pdtransfer.Protocol, reason string, local bool) {
	action := "failed"
	if local {
		action = "local"
	}
	m.disagg.fallbacks.Add(ctx, 1, metric.WithAttributes(protocolKey.String(string(proto)), reasonKey.String(reason), actionKey.String(action)))
}

func (m *metrics) prefillRetry(ctx context.Context, proto pdtransfer.Protocol, reason string) {
	m.disagg.retries.Add(ctx, 1, metric.WithAttributes(protocolKey.String(string(proto)), reasonKey.String(reason)))
}

func (m *metrics) clientField(ctx context.Context, field string) {
	m.disagg.fields.Add(ctx, 1, metric.WithAttributes(fieldKey.String(field)))
}
