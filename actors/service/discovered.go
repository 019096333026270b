package service

import (
	"cmp"
	"context"

	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Discovery is the service as Kubernetes discovery's registry
// (cluster/discovery/kube.Registry): the registrations it holds, written
// through the same Register and Unregister as POST /register and
// /unregister. In a cluster Registered reads the replicated registry, so
// every host sees what any host's discovery wrote.
type Discovery struct{ s *Service }

// Discovery returns the service's face to Kubernetes discovery.
func (s *Service) Discovery() Discovery { return Discovery{s} }

// Registered lists every registered stream (hand-made ones too: discovery
// leaves those alone), with the values the namespaces hold (tenant, block
// size and engine filled in).
func (d Discovery) Registered() []discovery.Registration {
	s := d.s
	if c := s.cfg.Cluster; c != nil {
		live := c.Live()
		out := make([]discovery.Registration, len(live))
		for i, e := range live {
			out[i] = discovery.Registration{Key: e.Key, Model: e.Worker.Model, Tenant: e.Worker.Tenant, BlockSize: e.Worker.BlockSize,
				Endpoint: e.Worker.Endpoint, ReplayEndpoint: e.Worker.ReplayEndpoint, ServingEndpoint: e.Worker.ServingEndpoint,
				MetricsEndpoint: e.Worker.MetricsEndpoint, Role: e.Worker.Role, BootstrapPort: e.Worker.BootstrapPort,
				Engine: cmp.Or(e.Worker.Engine, s.cfg.Engine)}
		}
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]discovery.Registration, 0, len(s.workers))
	for k, w := range s.workers {
		out = append(out, discovery.Registration{Key: k, Model: w.ns.key.model, Tenant: w.ns.key.tenant, BlockSize: uint32(w.ns.blockSize),
			Endpoint: w.reg.Endpoint, ReplayEndpoint: w.reg.ReplayEndpoint, ServingEndpoint: w.reg.ServingEndpoint, Engine: w.reg.Engine,
			MetricsEndpoint: w.reg.MetricsEndpoint, Role: w.reg.Role, BootstrapPort: w.reg.BootstrapPort})
	}
	return out
}

// Register registers one discovered stream.
func (d Discovery) Register(r discovery.Registration) error {
	return d.s.Register(context.Background(), api.Registration{InstanceID: r.Key.Worker, DpRank: r.Key.DpRank,
		Endpoint: r.Endpoint, ReplayEndpoint: r.ReplayEndpoint, ServingEndpoint: r.ServingEndpoint, Engine: r.Engine,
		MetricsEndpoint: r.MetricsEndpoint, Role: r.Role, BootstrapPort: r.BootstrapPort,
		ModelName: r.Model, TenantID: r.Tenant, BlockSize: r.BlockSize})
}

// Unregister removes one discovered stream (its blocks leave the index).
func (d Discovery) Unregister(r discovery.Registration) error {
	rank := r.Key.DpRank
	return d.s.Unregister(context.Background(), api.WorkerRef{InstanceID: r.Key.Worker, ModelName: r.Model,
		TenantID: r.Tenant, DpRank: &rank})
}

// Owns says whether this host writes worker id's discovered
// registrations: in a cluster, the registry's owner of the worker's rank
// 0 (registry.Owner: every host watches the same pods, one writes each);
// nil on one host.
func (d Discovery) Owns() func(messages.WorkerID) bool {
	c := d.s.cfg.Cluster
	if c == nil {
		return nil
	}
	return func(id messages.WorkerID) bool {
		return c.Owner(messages.WorkerKey{Worker: id}) == c.Self()
	}
}
