package discovery

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// The labels and annotations discovery reads on a pod (see the package
// doc). Model, tenant, block size and dp size are read from an annotation
// first, then a label (label values cannot hold a '/', model names often
// do).
const (
	KeyModel        = "kvrouter.io/model"
	KeyTenant       = "kvrouter.io/tenant"
	KeyBlockSize    = "kvrouter.io/block-size"
	KeyDpSize       = "kvrouter.io/dp-size"
	KeyEngine       = "kvrouter.io/engine"
	KeyKVEventsPort = "kvrouter.io/kv-events-port"
	KeyReplayPort   = "kvrouter.io/replay-port"
	KeyServingPort  = "kvrouter.io/serving-port"
	KeyMetricsPort  = "kvrouter.io/metrics-port"
	KeyMetricsPath  = "kvrouter.io/metrics-path"
	// LabelRole is llm-d's role label (prefill, decode, prefill-decode);
	// KeyRole, annotation or label, is read when it is absent.
	LabelRole = "llm-d.ai/role"
	KeyRole   = "kvrouter.io/role"
	// KeyBootstrapPort is an SGLang prefill engine's KV transfer
	// bootstrap port (number or container port name), on the pod's IP.
	KeyBootstrapPort = "kvrouter.io/bootstrap-port"
	PortKVEvents     = "kv-events" // container port name of the KV-event publisher
	PortReplay       = "kv-replay" // container port name of the replay endpoint
	PortServing      = "http"      // container port name of the OpenAI server
	DefaultKVPort    = 5557        // vLLM's default publisher port
	DefaultServePort = 8000        // vLLM's default OpenAI server port
	// MaxDpSize bounds the ranks one pod may claim.
	MaxDpSize = 256
)

// Pod is what discovery reads of one pod.
type Pod struct {
	Namespace, Name string
	IP              string
	// Ready: the pod's Ready condition is true.
	Ready bool
	// Deleting: the pod has a deletion timestamp (it is shutting down).
	Deleting            bool
	Labels, Annotations map[string]string
	// Ports are the container ports of every container.
	Ports []Port
}

// Port is one container port.
type Port struct {
	Name   string
	Number int32
}

// Pool is what discovery uses of an InferencePool: which pods it selects
// (equality on labels, in the pool's namespace) and where they serve.
type Pool struct {
	Selector    map[string]string
	TargetPorts []int32
}

// Config holds the defaults for what a pod does not say.
type Config struct {
	// Model and Tenant of pods without kvrouter.io/model, /tenant.
	Model, Tenant string
	// BlockSize of pods without kvrouter.io/block-size (must be > 0).
	BlockSize uint32
	// Engine is the engine choice of pods without kvrouter.io/engine.
	Engine string
	// Engines are the engine names accepted; nil accepts every name
	// (an unknown name is a pod skipped with ReasonBadValue either way).
	Engines []string
	// KVEventsPort and ReplayPort are the ports used when a pod names none
	// (0 ReplayPort: no replay endpoint).
	KVEventsPort, ReplayPort int32
	// ServingPort is used when neither the pod nor the pool names one.
	ServingPort int32
}

// Registration is one (worker, dp_rank) stream as discovery wants it
// registered.
type Registration struct {
	Key           messages.WorkerKey
	Model, Tenant string
	BlockSize     uint32
	// Endpoint and ReplayEndpoint are ZeroMQ addresses (tcp://IP:port);
	// ServingEndpoint is the engine's HTTP address (IP:port).
	Endpoint, ReplayEndpoint, ServingEndpoint string
	Engine                                    string
	// MetricsEndpoint is the engine's metrics URL when the pod names a
	// metrics port or path ("" otherwise: the serving endpoint's).
	MetricsEndpoint string
	// Role is the pod's prefill/decode role (api.ParseRole's stored form:
	// "" for both); BootstrapPort its SGLang bootstrap port (0: none),
	// on the pod's IP.
	Role          string
	BootstrapPort uint16
	// Pod is namespace/name (for logs; not part of what is registered).
	Pod string
}

// Reason says why a pod that matched is not registered.
type Reason string

// Reasons a pod is skipped.
const (
	ReasonBadValue    Reason = "bad_value"    // a label or annotation does not parse
	ReasonNoPort      Reason = "no_port"      // a named port the pod does not have
	ReasonIDCollision Reason = "id_collision" // two pods hash to one instance id
)

// Skip is a pod Desired left out, and why.
type Skip struct {
	Pod    string
	Reason Reason
	Detail string
}

// Desired returns the registrations the Ready pods call for, sorted by
// key, and the pods skipped. pool nil: no pool (every pod given counts).
func Desired(cfg Config, pods []Pod, pool *Pool) ([]Registration, []Skip) {
	return desired(cfg, pods, pool, WorkerID)
}

// desired is Desired with the pods' ids from idOf.
func desired(cfg Config, pods []Pod, pool *Pool, idOf func(namespace, name string) messages.WorkerID) ([]Registration, []Skip) {
	var regs []Registration
	var skips []Skip
	owner := map[messages.WorkerID]string{}
	collided := map[messages.WorkerID]bool{}
	for _, p := range pods {
		if !p.Ready || p.Deleting || p.IP == "" || (pool != nil && !selects(pool.Selector, p.Labels)) {
			continue
		}
		name := p.Namespace + "/" + p.Name
		rs, err := podRegistrations(cfg, p, pool, idOf(p.Namespace, p.Name))
		if err != nil {
			skips = append(skips, Skip{Pod: name, Reason: err.reason, Detail: err.detail})
			continue
		}
		id := rs[0].Key.Worker
		if other, dup := owner[id]; dup && other != name {
			collided[id] = true
			skips = append(skips, Skip{Pod: name, Reason: ReasonIDCollision, Detail: "instance id shared with " + other})
			continue
		}
		owner[id] = name
		regs = append(regs, rs...)
	}
	if len(collided) > 0 {
		for id := range collided {
			skips = append(skips, Skip{Pod: owner[id], Reason: ReasonIDCollision, Detail: "instance id shared with another pod"})
		}
		regs = slices.DeleteFunc(regs, func(r Registration) bool { return collided[r.Key.Worker] })
	}
	slices.SortFunc(regs, func(a, b Registration) int { return a.Key.Compare(b.Key) })
	slices.SortFunc(skips, func(a, b Skip) int { return cmp.Compare(a.Pod, b.Pod) })
	return regs, skips
}

// selects reports whether every pair of the selector is among labels (an
// empty selector selects nothing: a pool always names its pods).
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

type skipErr struct {
	reason Reason
	detail string
}

func bad(reason Reason, format string, args ...any) *skipErr {
	return &skipErr{reason: reason, detail: fmt.Sprintf(format, args...)}
}

// podRegistrations is one Ready pod's registrations, one per dp rank.
func podRegistrations(cfg Config, p Pod, pool *Pool, id messages.WorkerID) ([]Registration, *skipErr) {
	model := cmp.Or(value(p, KeyModel), cfg.Model)
	tenant := cmp.Or(value(p, KeyTenant), cfg.Tenant)
	bs, err := number(p, KeyBlockSize, int64(cfg.BlockSize), 1, 1<<16)
	if err != nil {
		return nil, err
	}
	dp, err := number(p, KeyDpSize, 1, 1, MaxDpSize)
	if err != nil {
		return nil, err
	}
	engine, err := engineOf(cfg, p)
	if err != nil {
		return nil, err
	}
	kv, err := port(p, KeyKVEventsPort, PortKVEvents, cfg.KVEventsPort)
	if err != nil {
		return nil, err
	}
	replay, err := port(p, KeyReplayPort, PortReplay, cfg.ReplayPort)
	if err != nil {
		return nil, err
	}
	serve, err := servingPorts(cfg, p, pool, int(dp))
	if err != nil {
		return nil, err
	}
	if kv == 0 {
		return nil, bad(ReasonNoPort, "no KV-event port")
	}
	mport, mpath, err := metricsOf(p)
	if err != nil {
		return nil, err
	}
	role, boot, err := roleOf(p)
	if err != nil {
		return nil, err
	}
	if int(kv)+int(dp)-1 > 65535 || (replay > 0 && int(replay)+int(dp)-1 > 65535) {
		return nil, bad(ReasonBadValue, "%d ranks from port %d run past 65535", dp, kv)
	}
	out := make([]Registration, dp)
	for r := range out {
		out[r] = Registration{Key: messages.WorkerKey{Worker: id, DpRank: messages.DpRank(r)},
			Model: model, Tenant: tenant, BlockSize: uint32(bs), Engine: engine, Pod: p.Namespace + "/" + p.Name,
			Endpoint: zmq(p.IP, kv+int32(r)), ServingEndpoint: net.JoinHostPort(p.IP, strconv.Itoa(int(serve[r]))),
			Role: role, BootstrapPort: boot}
		if mpath != "" {
			out[r].MetricsEndpoint = "http://" + net.JoinHostPort(p.IP, strconv.Itoa(int(cmp.Or(mport, serve[r])))) + mpath
		}
		if replay > 0 {
			out[r].ReplayEndpoint = zmq(p.IP, replay+int32(r))
		}
	}
	return out, nil
}

// metricsOf reads a pod's metrics annotations: path is "" when it has
// neither; port is the metrics port (a number or a container port name),
// 0 for the rank's serving port; path defaults to /metrics.
func metricsOf(p Pod) (int32, string, *skipErr) {
	portV, path := p.Annotations[KeyMetricsPort], p.Annotations[KeyMetricsPath]
	if portV == "" && path == "" {
		return 0, "", nil
	}
	if path == "" {
		path = "/metrics"
	}
	if path[0] != '/' || strings.ContainsAny(path, " \t?#") {
		return 0, "", bad(ReasonBadValue, "%s=%q: want an absolute URL path", KeyMetricsPath, path)
	}
	if portV == "" {
		return 0, path, nil
	}
	n, err := port(p, KeyMetricsPort, "", 0)
	return n, path, err
}

// roleOf reads a pod's prefill/decode role (the llm-d.ai/role label, else
// kvrouter.io/role; stored form, "" for both) and bootstrap port (0:
// none).
func roleOf(p Pod) (string, uint16, *skipErr) {
	v, key := p.Labels[LabelRole], LabelRole
	if v == "" {
		v, key = value(p, KeyRole), KeyRole
	}
	role, perr := api.ParseRole(v)
	if perr != nil {
		return "", 0, bad(ReasonBadValue, "%s: %v", key, perr)
	}
	if p.Annotations[KeyBootstrapPort] == "" {
		return role, 0, nil
	}
	n, err := port(p, KeyBootstrapPort, "", 0)
	return role, uint16(n), err
}

func zmq(ip string, port int32) string {
	return "tcp://" + net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

// value is a pod's annotation key, else its label key.
func value(p Pod, key string) string { return cmp.Or(p.Annotations[key], p.Labels[key]) }

// number parses a pod's value of key in [lo, hi]; def when absent.
func number(p Pod, key string, def, lo, hi int64) (int64, *skipErr) {
	v := value(p, key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, bad(ReasonBadValue, "%s=%q: want an integer in [%d, %d]", key, v, lo, hi)
	}
	return n, nil
}

// port resolves a port: the annotation key (a number or a container port
// name), else the container port named name, else def.
func port(p Pod, key, name string, def int32) (int32, *skipErr) {
	if v := p.Annotations[key]; v != "" {
		if n, err := strconv.ParseUint(v, 10, 16); err == nil && n > 0 {
			return int32(n), nil
		}
		if n, ok := named(p, v); ok {
			return n, nil
		}
		return 0, bad(ReasonNoPort, "%s=%q: not a port number nor a container port name of the pod", key, v)
	}
	if n, ok := named(p, name); ok {
		return n, nil
	}
	return def, nil
}

func named(p Pod, name string) (int32, bool) {
	for _, pt := range p.Ports {
		if pt.Name == name {
			return pt.Number, true
		}
	}
	return 0, false
}

// servingPorts is the serving port of each of dp ranks.
func servingPorts(cfg Config, p Pod, pool *Pool, dp int) ([]int32, *skipErr) {
	out := make([]int32, dp)
	if p.Annotations[KeyServingPort] == "" && pool != nil && len(pool.TargetPorts) > 0 {
		for r := range out {
			if len(pool.TargetPorts) >= dp {
				out[r] = pool.TargetPorts[r]
			} else {
				out[r] = pool.TargetPorts[0]
			}
		}
		return out, nil
	}
	n, err := port(p, KeyServingPort, PortServing, cmp.Or(cfg.ServingPort, DefaultServePort))
	if err != nil {
		return nil, err
	}
	for r := range out {
		out[r] = n
	}
	return out, nil
}

// engineOf is the label's engine choice, else the default (auto unless
// the router says otherwise: the stream's own batches tell engines apart
// better than an image name).
func engineOf(cfg Config, p Pod) (string, *skipErr) {
	e := cmp.Or(p.Labels[KeyEngine], cfg.Engine)
	if cfg.Engines != nil && !slices.Contains(cfg.Engines, e) {
		return "", bad(ReasonBadValue, "engine %q: want one of %v", e, cfg.Engines)
	}
	return e, nil
}
