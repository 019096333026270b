package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kvrouter/kvrouter/actors/telemetry"
)

// startTracing installs tracing as the OTEL_* environment asks
// (telemetry.StartTracing) for subcommand cmd. It returns the function that
// flushes and stops it on exit (within 5 s; a failure is reported on
// stderr), or false after printing why the environment's exporter could
// not be set up.
func startTracing(cmd string, stderr io.Writer) (stop func(), ok bool) {
	shutdown, err := telemetry.StartTracing(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter %s: %v\n", cmd, err)
		return nil, false
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "kvrouter %s: flushing traces: %v\n", cmd, err)
		}
	}, true
}
