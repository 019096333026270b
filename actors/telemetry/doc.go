// Package telemetry sets up kvrouter's OpenTelemetry: tracing configured
// from the standard OTEL_* environment (StartTracing), and the metrics
// operators scrape on /metrics (Metrics), exported in the Prometheus text
// format by OpenTelemetry's Prometheus exporter on a registry of its own.
//
// Spans themselves are started where the work happens (package
// messages/tracectx and its callers); this package only installs the
// provider they report to. Ingest metrics are read from the actors'
// existing counters at each scrape (Source), so the hot path pays nothing
// for them; the route path records its two histograms directly
// (Metrics.RecordRoute). README.md beside this file says what /metrics
// serves and how each figure is read.
package telemetry
