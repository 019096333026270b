package service

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// dumpTimeout bounds one namespace's index dump.
const dumpTimeout = 10 * time.Second

// Dump implements api.Backend: each namespace with its registered
// streams — registration and position, for a router bootstrapping from
// this one — then its index's events.
func (s *Service) Dump(_ context.Context, sink api.DumpSink) error {
	for _, ns := range s.sortedSpaces() {
		d, err := ns.pipe.Dump(dumpTimeout)
		if err != nil {
			return s.errTimeout("index dump", err)
		}
		pos := make(map[messages.StreamID]messages.Position, len(d.Positions))
		for _, p := range d.Positions {
			pos[p.Stream] = p
		}
		out := api.DumpNamespace{ModelName: ns.key.model, TenantID: ns.key.tenant, BlockSize: uint32(ns.blockSize),
			Streams: s.dumpStreams(ns, pos)}
		if err := sink.Namespace(out); err != nil {
			return err
		}
		for _, ev := range d.Events {
			if err := sink.Event(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// dumpStreams lists a namespace's registered streams, sorted, each with
// its position when the index knows it.
func (s *Service) dumpStreams(ns *namespace, pos map[messages.StreamID]messages.Position) []api.DumpStream {
	s.mu.Lock()
	keys := slices.SortedFunc(maps.Keys(ns.members), compareKeys)
	out := make([]api.DumpStream, 0, len(keys))
	for _, k := range keys {
		reg := s.workers[k].reg
		st := api.DumpStream{WorkerID: k.Worker, DpRank: k.DpRank, Endpoint: reg.Endpoint,
			ReplayEndpoint: reg.ReplayEndpoint, LoraName: reg.LoraName, ServingEndpoint: reg.ServingEndpoint, Engine: reg.Engine,
			MetricsEndpoint: reg.MetricsEndpoint, Role: reg.Role, BootstrapHost: reg.BootstrapHost, BootstrapPort: reg.BootstrapPort,
			Bind: reg.Bind, Topic: reg.Topic, TopicPod: reg.TopicPod}
		if p, ok := pos[messages.StreamID{Worker: k.Worker, DpRank: k.DpRank}]; ok && !reg.SharedSocket() {
			seq := p.Seq
			st.Seq, st.Exact = &seq, p.Exact
		}
		out = append(out, st)
	}
	s.mu.Unlock()
	return out
}
