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
	"github.com/kvrouter/kvrouter/cluster/discovery/kube"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	headroom       uint64
	reserve        int
	objectives     objectiveFlags
	objectivesFile string
	watch          bool
	resource       string
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
	fs.Uint64Var(&f.headroom, "flow-headroom-blocks", 0, "flow control: booked blocks kept free on every worker for each higher priority band, so a high-priority request finds room at once (with --proxy/--epp-shed-above-blocks; at least a request's blocks to keep a slot; idle when the higher bands do not use it, see --flow-reserve-workers; 0: none)")
	fs.IntVar(&f.reserve, "flow-reserve-workers", 0, "flow control: workers of the fleet kept with room for each higher priority band: a request is admitted only while that many others (healthy, not saturated, within --proxy/--epp-shed-above-blocks) still have room, so a high-priority request finds room at once; keeps less idle than --flow-headroom-blocks (between that many requests' room and that many whole workers) where the higher bands are a small share of the traffic (0: none)")
	fs.DurationVar(&f.interval, "flow-interval", 100*time.Millisecond, "flow control: how often the queue is looked at besides each freed request (an engine's signals recovering, TTLs)")
	fs.Var(&f.objectives, "objective", "flow control: an inference objective's priority, NAME=PRIORITY (repeatable): requests whose x-gateway-inference-objective (or x-llm-d-inference-objective) names it go in that band, higher first; below 0 they are sheddable (429 at once, never queued); any other is band 0")
	fs.BoolVar(&f.watch, "watch-inference-objectives", false, "flow control: also follow the InferencePool's InferenceObjectives in the cluster (with --discover kubernetes and --inference-pool; needs get/list/watch on them); --objective and --inference-objectives win for the names they give")
	fs.StringVar(&f.resource, "inference-objectives-resource", kube.ObjectiveResource.Group+"/"+kube.ObjectiveResource.Version+"/"+kube.ObjectiveResource.Resource, "with --watch-inference-objectives: GROUP/VERSION/RESOURCE of the objectives (the API is alpha; llm-d serves llm-d.ai/v1alpha2/inferenceobjectives)")
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
	case f.reserve < 0:
		return nil, fmt.Errorf("--flow-reserve-workers %d: want 0 (none) or more", f.reserve)
	}
	if _, err := f.gvr(); err != nil {
		return nil, err
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
		Objectives: bands, Headroom: f.headroom, ReserveWorkers: f.reserve}, nil
}

// gvr is --inference-objectives-resource.
func (f *flowFlags) gvr() (schema.GroupVersionResource, error) {
	parts := strings.Split(f.resource, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("--inference-objectives-resource %q: want GROUP/VERSION/RESOURCE", f.resource)
	}
	return schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}, nil
}

// watchObjectives follows the cluster's objectives of dc's pool into
// grd (with --watch-inference-objectives).
func (f *flowFlags) watchObjectives(ctx context.Context, grd *requestpath.Guard, dc *kube.Config, logger *slog.Logger) {
	if f.off || !f.watch || dc == nil || dc.Dynamic == nil {
		return
	}
	gvr, _ := f.gvr()
	err := kube.WatchObjectives(ctx, kube.ObjectivesConfig{Dynamic: dc.Dynamic, Namespace: dc.Namespace, Resource: gvr, Logger: logger,
		Set: func(raw []byte) {
			bands, skipped, err := requestpath.ParseObjectives(raw, dc.Pool)
			if err != nil {
				logger.Warn("inference objectives: the cluster's are refused, the last good ones kept", "err", err)
				return
			}
			grd.SetObjectives(bands)
			logger.Info("inference objectives", "pool", dc.Pool, "objectives", len(bands), "other_pools", skipped)
		}})
	if err != nil {
		logger.Error("inference objectives: not watched", "err", err)
	}
}

// run looks at grd's queue every --flow-interval until ctx ends (nothing
// with flow control off), and follows the cluster's objectives.
func (f *flowFlags) run(ctx context.Context, grd *requestpath.Guard, dc *kube.Config, logger *slog.Logger) {
	if f.off {
		return
	}
	f.watchObjectives(ctx, grd, dc, logger)
	logger.Info("flow control on", "ttl", f.ttl, "no_endpoint_ttl", f.noEPTTL, "max_requests", f.maxRequests,
		"max_bytes", f.maxBytes, "objectives", f.bands, "headroom_blocks", f.headroom, "reserve_workers", f.reserve)
	grd.Run(ctx, f.interval)
}
