// Package enginesignals reads what the engines report about themselves on
// their Prometheus /metrics endpoint — requests waiting and running, KV
// cache usage, block size and count, prefix-cache counters, vLLM's LoRA
// adapters — and says when an engine rank is saturated.
//
// The core is pure: Extractor turns one exposition into a plain Signals
// value with the names of the rank's engine and version (names.go; the
// table and where each name comes from are in README.md), and
// Thresholds.Saturation decides saturation from Signals and staleness.
// Scraper is the I/O edge: one goroutine per endpoint polls it on an
// interval with a timeout and a size cap, and keeps each rank's latest
// Observation (signals, successes, failures by Reason, staleness) for the
// service to read; nothing else is shared.
//
// The router's own booked load stays the first signal; how the cost
// combines it with these is in actors/routing (Reported). Why a scraper
// and not the engines' event stream: only the KV events travel on
// ZeroMQ, and every engine serves these gauges on the HTTP port the
// request path already dials.
package enginesignals
