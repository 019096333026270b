package httpapi

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
)

// traced wraps the API in OpenTelemetry's HTTP server span (otelhttp): a
// request continues the trace of its W3C traceparent header (through the
// global propagator telemetry.StartTracing installs) or starts one, and the
// span is named by the route pattern that served it ("POST /route",
// "POST /route/{request_id}/free"), never by a path carrying ids. The
// backend reads the span from the request's context. Probes and scrapes
// (/healthz, /readyz, /metrics) are not traced. otelhttp's own HTTP
// metrics are off: the handler counts its requests itself (WriteMetrics).
func traced(next http.Handler) http.Handler {
	return otelhttp.NewHandler(next, "kvrouter",
		otelhttp.WithFilter(func(r *http.Request) bool {
			switch r.URL.Path {
			case "/healthz", "/readyz", "/metrics":
				return false
			}
			return true
		}),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()))
}
