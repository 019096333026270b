// Package loadgen is the load driver behind `kvrouter-bench`: it
// replays Mooncake traces over simulated engines with finite LRU caches,
// through the real ingest pipeline (ZeroMQ → listeners → normalizers →
// coalescers → index) and the real route path (the service in process, and
// its HTTP API), and reports ingest throughput and lag, route latency under
// an open-loop sweep of offered rates, heap per index entry, and routing
// quality against baseline policies.
//
// The package is split like the rest of kvrouter:
//
//   - Pure parts, deterministic and tested directly: session inference
//     (sessions.go), percentiles and the coefficient of variation
//     (stats.go), the engine model behind every replay's load and TTFT
//     estimate (fleet.go), the baseline policies — the peers' routers
//     re-implemented (policy_core.go for Dynamo's cost, policy_sglang.go,
//     policy_llmd.go, policy_aibrix.go) and the simple ones (policy.go) —
//     with their block indexes (holders.go), the offline replay on
//     simengine caches (offline.go), the generated agentic workload
//     (agentic.go), the report and its table
//     (report.go), the scheduling-latency quantile (sched.go), and the
//     plots (plot.go).
//   - The I/O edge: trace loading (trace.go), a running router with its
//     simulated engines (cluster.go), the lag prober (lag.go), the feed
//     that serves routed requests on the engines (feed.go), and the phases
//     that drive it (ingest.go, sweep.go, quality.go), put together by Run
//     (run.go).
package loadgen
