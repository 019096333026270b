package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// healthFlags are kvrouter serve's active health checks of the serving
// endpoints.
type healthFlags struct {
	on                  bool
	path                string
	interval, timeout   time.Duration
	failures, successes int
}

func (f *healthFlags) add(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "health-checks", false, "check every registered serving endpoint with GET --health-check-path: one failing --health-failures checks in a row gets no requests (its breaker opens) until --health-successes pass (off by default: in Kubernetes, readiness already removes a failing pod)")
	fs.StringVar(&f.path, "health-check-path", requestpath.DefaultHealthPath, "with --health-checks: the path checked (vLLM and SGLang answer 200 on /health while they serve)")
	fs.DurationVar(&f.interval, "health-check-interval", requestpath.DefaultHealthInterval, "with --health-checks: time between two checks of an endpoint")
	fs.DurationVar(&f.timeout, "health-check-timeout", requestpath.DefaultHealthTimeout, "with --health-checks: deadline of one check (past it the check failed)")
	fs.IntVar(&f.failures, "health-failures", guard.DefaultHealthFailures, "with --health-checks: failed checks in a row that take an endpoint out")
	fs.IntVar(&f.successes, "health-successes", guard.DefaultHealthSuccesses, "with --health-checks: passed checks in a row that bring it back")
}

// config is the Guard's HealthConfig (nil without --health-checks).
func (f *healthFlags) config() (*requestpath.HealthConfig, error) {
	if !f.on {
		return nil, nil
	}
	switch {
	case f.interval <= 0 || f.timeout <= 0:
		return nil, fmt.Errorf("--health-check-interval and --health-check-timeout must be positive")
	case f.timeout > f.interval:
		return nil, fmt.Errorf("--health-check-timeout %v is longer than --health-check-interval %v", f.timeout, f.interval)
	case f.failures < 1 || f.successes < 1:
		return nil, fmt.Errorf("--health-failures and --health-successes: want 1 or more")
	case len(f.path) == 0 || f.path[0] != '/':
		return nil, fmt.Errorf("--health-check-path %q: want a path starting with /", f.path)
	}
	return &requestpath.HealthConfig{Path: f.path, Interval: f.interval, Timeout: f.timeout,
		Thresholds: guard.HealthConfig{Failures: f.failures, Successes: f.successes}}, nil
}

// servingEndpoints lists the registered serving endpoints (each once).
func servingEndpoints(ctx context.Context, svc workerLister, logger *slog.Logger) []serving.Endpoint {
	ws, err := svc.Workers(ctx)
	if err != nil {
		logger.Warn("health checks: listing the workers", "err", err)
		return nil
	}
	var out []serving.Endpoint
	for _, w := range ws {
		for _, r := range w.Ranks {
			if ep, err := serving.Parse(r.ServingEndpoint); err == nil {
				out = append(out, ep)
			}
		}
	}
	return out
}

// run starts the Guard's loops until ctx ends: flow control's queue
// (--flow-interval) and objectives (dc: the discovery's, nil without),
// and the health checks.
func (f *guardFlags) run(ctx context.Context, grd *requestpath.Guard, svc workerLister, dc *kube.Config, logger *slog.Logger) {
	if f.health.on {
		logger.Info("health checks on", "path", f.health.path, "interval", f.health.interval, "failures", f.health.failures, "successes", f.health.successes)
		go grd.RunHealth(ctx, func(ctx context.Context) []serving.Endpoint { return servingEndpoints(ctx, svc, logger) })
	}
	f.flow.run(ctx, grd, dc, logger)
}
