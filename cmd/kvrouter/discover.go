package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/cluster/discovery/kube"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const discoverHelp = `
Kubernetes discovery (--discover kubernetes): every Ready pod of --namespace
that matches --selector and/or is selected by --inference-pool becomes a
worker; a pod that loses readiness or is deleted is unregistered (its
blocks leave the index); a pod whose IP changes is registered again. Each
pod says how to reach it with container port names or annotations (the
defaults match vLLM):
  KV events   annotation kvrouter.io/kv-events-port (a number or a port name), else the port named kv-events, else --discover-kv-events-port
  replay      annotation kvrouter.io/replay-port, else the port named kv-replay, else --discover-replay-port
  serving     annotation kvrouter.io/serving-port, else the pool's target port, else the port named http, else --discover-serving-port
  model, tenant, block size, dp size: kvrouter.io/model, /tenant, /block-size, /dp-size (annotation or label;
  dp size N: ranks 0..N-1 on consecutive ports); engine: label kvrouter.io/engine, else --engine.
The router needs get/list/watch on pods (and inferencepools) in the namespace.
In a cluster every host watches and one host writes each pod's registrations.
`

// discoverFlags are kvrouter serve's discovery flags.
type discoverFlags struct {
	mode, selector, pool, namespace, kubeconfig string
	kvPort, replayPort, servingPort             int
	resync                                      time.Duration
}

func addDiscoverFlags(fs *flag.FlagSet) *discoverFlags {
	d := &discoverFlags{}
	fs.StringVar(&d.mode, "discover", "", "find engine workers by themselves: kubernetes (pods; see Kubernetes discovery above); empty: off")
	fs.StringVar(&d.selector, "selector", "", "label selector of the engine pods, e.g. llm-d.ai/inference-serving=true (--discover)")
	fs.StringVar(&d.pool, "inference-pool", "", "NAMESPACE/NAME of an InferencePool (inference.networking.k8s.io/v1) whose selector and target ports choose the pods (--discover)")
	fs.StringVar(&d.namespace, "namespace", "", "namespace whose pods are watched (default: the pool's, else this pod's own, else default)")
	fs.StringVar(&d.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster service account)")
	fs.IntVar(&d.kvPort, "discover-kv-events-port", discovery.DefaultKVPort, "KV-event port of pods that name none (vLLM's default)")
	fs.IntVar(&d.replayPort, "discover-replay-port", 0, "replay port of pods that name none (0: no replay endpoint)")
	fs.IntVar(&d.servingPort, "discover-serving-port", discovery.DefaultServePort, "serving port of pods that name none and have no pool")
	fs.DurationVar(&d.resync, "discover-resync", kube.DefaultResync, "period of the full reconcile pass (changes are applied as they come)")
	return d
}

// inClusterNamespace is where Kubernetes tells a pod its namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// config is the discovery the flags ask for (nil without --discover), for
// the router's defaults (block size, engine, model).
func (d *discoverFlags) config(blockSize int, engineChoice, model string) (*kube.Config, error) {
	switch d.mode {
	case "":
		return nil, nil
	case "kubernetes":
	default:
		return nil, fmt.Errorf("--discover %q: want kubernetes", d.mode)
	}
	ns, pool := d.namespace, ""
	if d.pool != "" {
		pns, name, ok := strings.Cut(d.pool, "/")
		if !ok || pns == "" || name == "" {
			return nil, fmt.Errorf("--inference-pool %q: want NAMESPACE/NAME", d.pool)
		}
		if ns != "" && ns != pns {
			return nil, fmt.Errorf("--inference-pool %s is not in --namespace %s (a pool selects pods of its own namespace)", d.pool, ns)
		}
		ns, pool = pns, name
	}
	if ns == "" {
		ns = "default"
		if b, err := os.ReadFile(inClusterNamespace); err == nil && strings.TrimSpace(string(b)) != "" {
			ns = strings.TrimSpace(string(b))
		}
	}
	for _, p := range []int{d.kvPort, d.servingPort} {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("discovery port %d: want 1 to 65535", p)
		}
	}
	if d.replayPort < 0 || d.replayPort > 65535 {
		return nil, fmt.Errorf("--discover-replay-port %d: want 0 to 65535", d.replayPort)
	}
	return &kube.Config{Namespace: ns, Selector: d.selector, Pool: pool, Resync: d.resync,
		Core: discovery.Config{Model: model, Tenant: api.DefaultTenant, BlockSize: uint32(blockSize), Engine: engineChoice,
			Engines: engine.Choices(), KVEventsPort: int32(d.kvPort), ReplayPort: int32(d.replayPort), ServingPort: int32(d.servingPort)}}, nil
}

// clients connects to the API server (--kubeconfig, else the in-cluster
// service account): ns's pods, and the dynamic client when a pool is read.
func (d *discoverFlags) clients(ns string, pool bool) (kube.PodClient, dynamic.Interface, error) {
	var rc *rest.Config
	var err error
	if d.kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	} else if rc, err = rest.InClusterConfig(); errors.Is(err, rest.ErrNotInCluster) {
		err = errors.New("not running in a Kubernetes pod: give --kubeconfig")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	rc.UserAgent = "kvrouter"
	pods, err := kube.NewPodClient(rc, ns)
	if err != nil {
		return nil, nil, err
	}
	var dyn dynamic.Interface
	if pool {
		if dyn, err = dynamic.NewForConfig(rc); err != nil {
			return nil, nil, err
		}
	}
	return pods, dyn, nil
}

// discoverySyncTimeout bounds the wait for the first listing of pods.
const discoverySyncTimeout = time.Minute

// startDiscovery runs cfg's discovery against svc (its clients set).
func startDiscovery(cfg kube.Config, svc *service.Service, logger *slog.Logger) (*kube.Discovery, error) {
	reg := svc.Discovery()
	cfg.Registry, cfg.Owns, cfg.Logger = reg, reg.Owns(), logger
	ctx, cancel := context.WithTimeout(context.Background(), discoverySyncTimeout)
	defer cancel()
	return kube.Start(ctx, cfg)
}
