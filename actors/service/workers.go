// GET /workers: every registered worker, each rank's stream, engine,
// health and load as this host knows them.

package service

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kvrouter/kvrouter/actors/telemetry"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Workers implements api.Backend.
func (s *Service) Workers(context.Context) ([]api.WorkerInfo, error) {
	s.mu.Lock()
	regs := make(map[messages.WorkerKey]*worker, len(s.workers))
	for k, w := range s.workers {
		c := *w // a cluster's reconcile changes a worker's listening under mu
		regs[k] = &c
	}
	s.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(regs), compareKeys)
	var remote map[messages.WorkerKey]registry.StreamState
	if s.cfg.Cluster != nil {
		remote = s.remoteStates(regs)
	}
	out := []api.WorkerInfo{}
	obs, outside := s.signalsNow()
	hits, _ := s.hitStats()
	now := time.Now()
	for _, k := range keys {
		if len(out) == 0 || out[len(out)-1].InstanceID != k.Worker {
			out = append(out, api.WorkerInfo{InstanceID: k.Worker})
		}
		last := &out[len(out)-1]
		if w := regs[k]; s.cfg.Cluster != nil && !w.listening && !w.reg.EventLess() {
			st, known := remote[k]
			ri := s.remoteRankInfo(k, w, st, known)
			ri.Signals = s.signalsInfo(k, obs, outside, now)
			ri.HitCheck = hitCheckInfo(hits, k)
			last.Ranks = append(last.Ranks, ri)
		} else {
			ri := s.rankInfo(k, w)
			if s.cfg.Cluster != nil && !w.reg.EventLess() { // every host routes an event-less worker: no owner
				ri.Owner = s.cfg.Cluster.Owner(k)
			}
			ri.Signals = s.signalsInfo(k, obs, outside, now)
			ri.HitCheck = hitCheckInfo(hits, k)
			last.Ranks = append(last.Ranks, ri)
		}
	}
	return out, nil
}

func (s *Service) rankInfo(k messages.WorkerKey, w *worker) api.RankInfo {
	ri := api.RankInfo{DpRank: k.DpRank, ModelName: w.ns.key.model, TenantID: w.ns.key.tenant,
		Endpoint: w.reg.Endpoint, ReplayEndpoint: w.reg.ReplayEndpoint, LoraName: w.reg.LoraName, ServingEndpoint: w.reg.ServingEndpoint,
		Engine: w.reg.Engine, TopicPod: w.reg.TopicPod, BlockSize: uint32(w.ns.blockSize), State: api.StateRecovering, Mode: api.ModeEvents, Warnings: []string{}}
	withRole(&ri, w.reg)
	if w.reg.EventLess() {
		return s.eventLessInfo(k, w, ri)
	}
	stream := messages.StreamID{Worker: k.Worker, DpRank: k.DpRank}
	ls, err := w.ns.pipe.ListenerStats(stream, s.cfg.Timeout)
	if err != nil {
		ri.Warnings = append(ri.Warnings, "listener not answering")
		return ri
	}
	st, _ := w.ns.pipe.Status(s.cfg.Timeout)
	var state = api.StateRecovering
	if st != nil {
		ss := st.Streams[stream]
		state = api.StreamState(telemetry.StateOf(ss.State, ls.Recovering()))
		if ls.Delivered > 0 {
			seq := ss.LastSeq
			ri.LastSeq = &seq
		}
	}
	ri.State = state
	if !ls.Connected && ls.Subscribed > 0 {
		ri.Warnings = append(ri.Warnings, "connection to the engine lost: reconnecting (its blocks are verified once it is back)")
	}
	if ls.Received == 0 && time.Since(w.at) > s.cfg.SilentAfter {
		ri.Warnings = append(ri.Warnings, "no events received since registration")
	}
	if ns, err := w.ns.pipe.NormalizerStats(stream, s.cfg.Timeout); err == nil {
		if n := ns.Stream.Rejected[messages.ReasonBlockSizeMismatch]; n > 0 {
			ri.Warnings = append(ri.Warnings, fmt.Sprintf(
				"%d events rejected: the engine's block size differs from the registered %d", n, w.ns.blockSize))
		}
		ri.EngineDetected, ri.EngineEvidence = ns.StreamEngine.Detected, ns.StreamEngine.Evidence
		if warn := ns.StreamEngine.Warning(); warn != "" {
			ri.Warnings = append(ri.Warnings, warn)
		}
	}
	if is, err := w.ns.pipe.IndexStats(s.cfg.Timeout); err == nil {
		ri.Blocks = uint64(is.TreeSizes[k])
	}
	return ri
}
