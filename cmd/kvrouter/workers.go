package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// workerSpec is one --worker value: the engine stream to follow and, for
// kvrouter serve, where the request path sends the rank's requests
// (serving=, "" when not given), its prefill/decode role (role=, stored
// form: "" for both) and SGLang bootstrap address (bootstrap=[HOST:]PORT).
type workerSpec struct {
	listener.Config
	ServingEndpoint string
	Role            string
	BootstrapHost   string
	BootstrapPort   uint16
}

// workerFlags collects repeated --worker values (see parseWorker).
type workerFlags []workerSpec

// String implements flag.Value.
func (w *workerFlags) String() string { return fmt.Sprintf("%d workers", len(*w)) }

// Set implements flag.Value.
func (w *workerFlags) Set(v string) error {
	cfg, err := parseWorker(v)
	if err != nil {
		return err
	}
	*w = append(*w, cfg)
	return nil
}

// parseWorker parses ID[:RANK]=ENDPOINT[,replay=EP][,serving=HOST:PORT][,engine=NAME][,role=ROLE][,bootstrap=[HOST:]PORT][,topic=PREFIX][,bind][,by-topic][,pod=POD[=ID]…].
func parseWorker(v string) (workerSpec, error) {
	var cfg workerSpec
	id, rest, ok := strings.Cut(v, "=")
	if !ok {
		return cfg, fmt.Errorf("worker %q: want ID[:RANK]=ENDPOINT[,replay=ENDPOINT][,engine=NAME][,bind]", v)
	}
	idStr, rankStr, hasRank := strings.Cut(id, ":")
	worker, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil {
		return cfg, fmt.Errorf("worker %q: id %q is not an unsigned integer", v, idStr)
	}
	cfg.Stream.Worker = messages.WorkerID(worker)
	if hasRank {
		rank, err := strconv.ParseUint(rankStr, 10, 32)
		if err != nil {
			return cfg, fmt.Errorf("worker %q: dp rank %q is not an unsigned integer", v, rankStr)
		}
		cfg.Stream.DpRank = messages.DpRank(rank)
	}
	parts := strings.Split(rest, ",")
	cfg.Endpoint = parts[0]
	if !strings.Contains(cfg.Endpoint, "://") {
		return cfg, fmt.Errorf("worker %q: endpoint %q has no transport (want tcp://host:port)", v, cfg.Endpoint)
	}
	for _, opt := range parts[1:] {
		key, val, _ := strings.Cut(opt, "=")
		switch key {
		case "replay":
			cfg.ReplayEndpoint = val
		case "serving":
			if _, err := serving.Parse(val); err != nil {
				return cfg, fmt.Errorf("worker %q: %v", v, err)
			}
			cfg.ServingEndpoint = val
		case "engine":
			if _, err := engine.Choose(val); err != nil {
				return cfg, fmt.Errorf("worker %q: %v", v, err)
			}
			cfg.Engine = val
		case "role":
			if cfg.Role, err = api.ParseRole(val); err != nil {
				return cfg, fmt.Errorf("worker %q: %v", v, err)
			}
		case "bootstrap":
			if cfg.BootstrapHost, cfg.BootstrapPort, err = parseBootstrap(val); err != nil {
				return cfg, fmt.Errorf("worker %q: %v", v, err)
			}
		case "bind":
			cfg.Bind = true
		case "by-topic":
			cfg.TopicIdentity = true
		case "topic":
			cfg.Topic = val
		case "pod":
			// POD[=ID]: the pod of a kv@<pod>@<model> topic (an address, so
			// it may hold ':') and the worker id its stream takes (the
			// --worker's own ID when not given).
			pod, idStr, hasID := strings.Cut(val, "=")
			id := worker
			if hasID {
				id, err = strconv.ParseUint(idStr, 10, 64)
			}
			if pod == "" || err != nil {
				return cfg, fmt.Errorf("worker %q: pod=%s: want pod=POD or pod=POD=ID (POD as the topic names it, ID an unsigned integer)", v, val)
			}
			if cfg.Pods == nil {
				cfg.Pods = map[string]messages.WorkerID{}
			}
			cfg.Pods[pod] = messages.WorkerID(id)
		default:
			return cfg, fmt.Errorf("worker %q: unknown option %q (replay=, serving=, engine=, role=, bootstrap=, topic=, bind, by-topic, pod=)", v, key)
		}
	}
	if cfg.Pods != nil && !cfg.TopicIdentity {
		return cfg, fmt.Errorf("worker %q: pod= maps the pods of a socket shared by topic: it needs by-topic", v)
	}
	return cfg, nil
}

// registrations are serve's --worker workers, in namespace (model,
// tenant). A by-topic --worker is one pod of a socket several workers
// share: it names its one pod, whose worker is the --worker's own.
func registrations(workers workerFlags, model, tenant string) ([]api.Registration, error) {
	var regs []api.Registration
	for _, w := range workers {
		reg := api.Registration{InstanceID: w.Stream.Worker, DpRank: w.Stream.DpRank,
			Endpoint: w.Endpoint, ReplayEndpoint: w.ReplayEndpoint, ServingEndpoint: w.ServingEndpoint, Engine: w.Engine,
			Role: w.Role, BootstrapHost: w.BootstrapHost, BootstrapPort: w.BootstrapPort, ModelName: model, TenantID: tenant,
			Bind: w.Bind, Topic: w.Topic}
		if w.TopicIdentity {
			pods := slices.Sorted(maps.Keys(w.Pods))
			if len(pods) != 1 || w.Pods[pods[0]] != w.Stream.Worker {
				return nil, fmt.Errorf("--worker %d: by-topic registers one pod of the shared socket %s as this worker: give it as pod=POD (pods %v)",
					w.Stream.Worker, w.Endpoint, pods)
			}
			reg.TopicPod = pods[0]
		}
		regs = append(regs, reg)
	}
	return regs, nil
}

// parseBootstrap reads an SGLang bootstrap address: PORT (on the serving
// endpoint's host) or HOST:PORT.
func parseBootstrap(v string) (string, uint16, error) {
	host, port := "", v
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		host, port = strings.Trim(v[:i], "[]"), v[i+1:]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("bootstrap %q: want PORT or HOST:PORT, port in 1..65535", v)
	}
	if err := api.CheckBootstrapHost(host); err != nil {
		return "", 0, err
	}
	return host, uint16(n), nil
}
