// Package chaos is kvrouter's fault-injection harness: it runs simulated
// engines (package simengine) behind a fault-injecting ZeroMQ hop into a
// real pipeline, and checks after quiescence that the index converged to
// the engines' caches.
//
//   - Plan (plan.go) is a pure value drawn from a seed: which message the
//     hop drops, duplicates, reorders, truncates or corrupts, where it cuts
//     the connection, and before which prompt an engine restarts (cache
//     wiped or kept). The same seed always gives the same plan.
//   - Hop (hop.go) is the I/O edge: a SUB on the engine's PUB and a PUB
//     the router dials, carrying out a plan's message faults.
//   - Check (check.go) is the convergence checker, pure: per (worker,
//     dp_rank), 0 phantom blocks always; 0 missing blocks when the replay
//     buffer held the history; otherwise missing blocks only on a stream
//     flagged degraded.
//   - RunTrial and Run (trial.go, run.go) run trials with fixed seeds and
//     return a Report whose text names each failed seed with the command
//     that reruns it.
//
// README.md beside this file says how to run it, what the trials hold the
// pipeline to, and the one known limit.
package chaos
