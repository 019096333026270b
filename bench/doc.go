// Package bench holds kvrouter's performance measurements: Go benchmarks of
// the hot paths (run with `make bench`) and, as the pipeline grows, the load
// driver behind `kvrouter-bench`. Figures and the machine they were taken on
// are recorded in bench/README.md.
package bench
