package service

import (
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// listen starts the listener of a registration in namespace ns (called
// with s.mu held): its own socket, or, for a pod of a socket shared by
// topic (Registration.TopicPod), a place on that socket's one listener
// (pipeline.AddPod). A shared socket belongs to one namespace: its pods
// all feed that namespace's pipeline. A pod has no replay, so it never
// resumes a loaded position.
func (s *Service) listen(ns *namespace, reg api.Registration, bs int, resume *messages.Position) error {
	if !reg.SharedSocket() {
		if err := ns.pipe.AddListener(s.listenerConfig(reg, bs, resume)); err != nil {
			return api.Errorf(api.ErrInvalid, "invalid_endpoint", "%v", err)
		}
		return nil
	}
	for k, w := range s.workers {
		if w.reg.SharedSocket() && w.reg.Endpoint == reg.Endpoint && w.ns != ns {
			return api.Errorf(api.ErrConflict, "shared_socket_namespace",
				"%s is the shared socket of model %q tenant %q (worker %d): its pods all register there",
				reg.Endpoint, w.ns.key.model, w.ns.key.tenant, k.Worker)
		}
	}
	if err := ns.pipe.AddPod(s.listenerConfig(reg, bs, nil), reg.TopicPod); err != nil {
		return api.Errorf(api.ErrInvalid, "invalid_endpoint", "%v", err)
	}
	return nil
}

// checkUnclustered refuses, in a cluster, what the cluster's worker
// registry does not carry: a bound socket, a topic prefix, a pod of a
// shared socket (each host would bind the same port; the registry's
// owner follows one stream per entry, not a socket shared by several).
func checkUnclustered(reg api.Registration) error {
	if reg.Bind || reg.Topic != "" || reg.SharedSocket() {
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue,
			"worker %d: a bound socket, a topic prefix or a pod of a shared socket is for one router host, not a cluster", reg.InstanceID)
	}
	return nil
}
