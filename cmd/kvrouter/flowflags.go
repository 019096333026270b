package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// flowFlags are kvrouter serve's flow-control options: the queue a
// request waits in when no worker has room, shared by the proxy and the
// picker.
type flowFlags struct {
	off            bool
	ttl, noEPTTL   time.Duration
	interval       time.Duration
	maxRequests    int
	maxBytes       int64
	objectives     objectiveFlags
	objectivesFile string
	bands          int // objectives known, for the start-up log
}

// objectiveFlags are the repeatable --objective NAME=PRIORITY.
type objectiveFlags map[string]int

func (o *objectiveFlags) String() string {
	if o == nil || *o == nil {
		return ""
	}
	var parts []string
	for k, v := range *o {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, ",")
}

func (o *objectiveFlags) Set(v string) error {
	name, prio, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=PRIORITY, got %q", v)
	}
	n, err := strconv.ParseInt(prio, 10, 32)
	if err != nil {
		return fmt.Errorf("%q: priority %q is not a 32-bit integer", v, prio)
	}
	if *o == nil {
		*o = objectiveFlags{}
	}
	if _, dup := (*o)[name]; dup {
		return fmt.Errorf("objective %q given twice", name)
	}
	(*o)[name] = int(n)
	return nil
}

func (f *flowFlags) add(fs *flag.FlagSet) {
	fs.BoolVar(&f.off, "no-flow-control", false, "answer 429 at once when no worker has room (every one saturated by --engine-signals or over --proxy/--epp-shed-above-blocks) instead of queueing the request")
	fs.DurationVar(&f.ttl, "flow-ttl", requestpath.DefaultFlowTTL, "flow control: longest wait of a queued request; past it the answer is 429 overloaded with Retry-After")
	fs.DurationVar(&f.noEPTTL, "no-endpoint-ttl", 0, "flow control: a request finding no serving endpoint at all waits this long for one (scale from zero) before its 503 (0: 503 at once)")
	fs.IntVar(&f.maxRequests, "flow-max-requests", requestpath.DefaultFlowMaxRequests, "flow control: requests queued at most; past it the lowest band's newest are evicted (429) for a higher band's")
	fs.Int64Var(&f.maxBytes, "flow-max-bytes", requestpath.DefaultFlowMaxBytes, "flow control: request body bytes queued at most, as --flow-max-requests")
	fs.DurationVar(&f.interval, "flow-interval", 100*time.Millisecond, "flow control: how often the queue is looked at besides each freed request (an engine's signals recovering, TTLs)")
	fs.Var(&f.objectives, "objective", "flow control: an inference objective's priority, NAME=PRIORITY (repeatable): requests whose x-gateway-inference-objective (or x-llm-d-inference-objective) names it go in that band, higher first; below 0 they are sheddable (429 at once, never queued); any other is band 0")
	fs.StringVar(&f.objectivesFile, "inference-objectives", "", "flow control: InferenceObjectives as `kubectl get inferenceobjectives -o json` prints them (metadata.name, spec.priority; with --inference-pool, other pools' are left out); --objective adds to them")
}

// config is the Guard's FlowConfig (nil with --no-flow-control); pool is
// the InferencePool's name ("" : none).
func (f *flowFlags) config(pool string) (*requestpath.FlowConfig, error) {
	if f.off {
		return nil, nil
	}
	switch {
	case f.ttl <= 0 || f.interval <= 0:
		return nil, fmt.Errorf("--flow-ttl and --flow-interval must be positive")
	case f.noEPTTL < 0:
		return nil, fmt.Errorf("--no-endpoint-ttl %v: want 0 (503 at once) or more", f.noEPTTL)
	case f.maxRequests < 1 || f.maxBytes < 1:
		return nil, fmt.Errorf("--flow-max-requests and --flow-max-bytes must be positive")
	}
	bands := map[string]int{}
	if f.objectivesFile != "" {
		var err error
		if bands, _, err = requestpath.LoadObjectives(f.objectivesFile, pool); err != nil {
			return nil, fmt.Errorf("--inference-objectives: %w", err)
		}
	}
	for name, band := range f.objectives {
		if _, dup := bands[name]; dup {
			return nil, fmt.Errorf("--objective %s: also in --inference-objectives %s", name, f.objectivesFile)
		}
		bands[name] = band
	}
	f.bands = len(bands)
	return &requestpath.FlowConfig{TTL: f.ttl, NoEndpointTTL: f.noEPTTL, MaxRequests: f.maxRequests, MaxBytes: f.maxBytes,
		Objectives: bands}, nil
}

// run looks at grd's queue every --flow-interval until ctx ends (nothing
// with flow control off).
func (f *flowFlags) run(ctx context.Context, grd *requestpath.Guard, logger *slog.Logger) {
	if f.off {
		return
	}
	logger.Info("flow control on", "ttl", f.ttl, "no_endpoint_ttl", f.noEPTTL, "max_requests", f.maxRequests,
		"max_bytes", f.maxBytes, "objectives", f.bands)
	grd.Run(ctx, f.interval)
}
