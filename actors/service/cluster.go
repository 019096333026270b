package service

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// In a cluster (Config.Cluster) the registry of workers is the cluster's
// replicated one: /register and /unregister write it (on any host), and
// every host reconciles its own state with it — every namespace and
// worker exists on every host (so each answers /query, /route, /workers
// for all of them), and each stream's listener runs on its owner only
// (registry.Owner over the current members). When the members change,
// the new owner starts the stream's listener (a fresh one: a resync, then
// the engine's replay buffer) and the old one, if alive, stops its own;
// the shard follows the newest listener (clusterindex fences), so the
// moment both run is harmless.
//
// An event-less worker (events "none") has no stream to follow: its entry
// is on every host like the others, and every host's route actor keeps its
// own copy of the worker's approximate cache, fed by its own decisions and
// by the predictions the other hosts push (pushPrediction). Replicated,
// not owned: each route decision reads the cache in the same step as it
// books (a remote owner would put a round trip in the request path and
// lose a sibling routed meanwhile), and the pushes already carry every
// booked decision. A lost push, or a host that joins later, leaves that
// host's copy short of some blocks — it routes those as a cold worker,
// which is where an approximate cache errs anyway; the LRU bound and the
// event-less TTL hold on every copy.

// What a member logs when it starts following a stream and when it hands
// one over to its new owner.
const (
	logFollowing  = "cluster: following a stream"
	logHandedOver = "cluster: stream handed over to its new owner"
)

// reconcileEvery is how often a member reconciles even without a change
// (a listener that failed to start is tried again).
const reconcileEvery = time.Second

// followRegistry reconciles on every registry or topology change.
func (s *Service) followRegistry() {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.cfg.Cluster.Changes():
		case <-t.C:
		}
		s.mu.Lock()
		select {
		case <-s.stop: // closed meanwhile: the pipelines are stopped
		default:
			s.reconcile()
		}
		s.mu.Unlock()
	}
}

// registerClustered checks a registration against the cluster's registry
// and writes it there; the owner starts its listener.
func (s *Service) registerClustered(reg api.Registration) error {
	if err := checkUnclustered(reg); err != nil {
		return err
	}
	if err := s.withEngine(&reg); err != nil {
		return err
	}
	if err := withRoleChecked(&reg); err != nil {
		return err
	}
	bs := uint32(reg.BlockSize)
	if bs == 0 {
		bs = uint32(s.cfg.BlockSize)
	}
	key := messages.WorkerKey{Worker: reg.InstanceID, DpRank: reg.DpRank}
	c := s.cfg.Cluster
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if e, dup := c.Get(key); dup {
		return api.Errorf(api.ErrConflict, "already_registered",
			"worker %d rank %d is already registered (model %q, tenant %q)", key.Worker, key.DpRank, e.Worker.Model, e.Worker.Tenant)
	}
	tenant := tenantOf(reg.TenantID)
	for _, e := range c.Live() {
		if e.Worker.Model == reg.ModelName && e.Worker.Tenant == tenant && e.Worker.BlockSize != bs {
			return api.Errorf(api.ErrInvalid, "block_size_mismatch",
				"model %q tenant %q uses block size %d, not %d", reg.ModelName, tenant, e.Worker.BlockSize, bs)
		}
	}
	if reg.EventLess() {
		if err := checkEventLess(reg); err != nil {
			return err
		}
	} else {
		lc := s.listenerConfig(reg, int(bs), nil)
		lc.Next = actor.NewPID("validate", "validate") // checked here, started by the owner
		if _, err := listener.Props(lc); err != nil {
			return api.Errorf(api.ErrInvalid, "invalid_endpoint", "%v", err)
		}
	}
	c.Put(registry.Entry{Key: key, Worker: registry.Worker{Model: reg.ModelName, Tenant: tenant, BlockSize: bs,
		Endpoint: reg.Endpoint, ReplayEndpoint: reg.ReplayEndpoint, Lora: reg.LoraName, ServingEndpoint: reg.ServingEndpoint,
		Engine: reg.Engine, MetricsEndpoint: reg.MetricsEndpoint, Role: reg.Role, BootstrapHost: reg.BootstrapHost, BootstrapPort: reg.BootstrapPort,
		Events: reg.Events, CacheBlocks: reg.CacheBlocks}})
	s.mu.Lock()
	s.reconcile()
	s.mu.Unlock()
	return nil
}

// unregisterClustered writes tombstones for the streams ref names.
func (s *Service) unregisterClustered(ref api.WorkerRef) error {
	c := s.cfg.Cluster
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var gone []registry.Entry
	for _, e := range c.Live() {
		if matches(ref, e.Key, nsKey{e.Worker.Model, e.Worker.Tenant}) {
			e.Deleted = true
			gone = append(gone, e)
		}
	}
	if len(gone) == 0 {
		return unknownWorker(ref)
	}
	c.Put(gone...)
	s.mu.Lock()
	s.reconcile()
	s.mu.Unlock()
	return nil
}

// reconcile brings this host in line with the registry and the members.
// Called with s.mu held.
func (s *Service) reconcile() {
	c := s.cfg.Cluster
	members, self := c.Members(), c.Self()
	touched := map[*namespace]bool{}
	live := map[messages.WorkerKey]bool{}
	for _, e := range c.Live() {
		live[e.Key] = true
		w := s.workers[e.Key]
		if w != nil && w.version != e.Version { // registered again, maybe elsewhere
			touched[w.ns] = true
			s.drop(e.Key, w)
			w = nil
		}
		if w == nil {
			if w = s.adopt(e); w == nil {
				continue
			}
			touched[w.ns] = true
		}
		own := registry.Owner(members, e.Key) == self && !w.reg.EventLess() // nothing to follow
		switch {
		case own && !w.listening:
			lc := s.listenerConfig(w.reg, w.ns.blockSize, nil)
			if err := w.ns.pipe.AddListener(lc); err != nil {
				s.system.Logger().Warn("cluster: cannot follow a stream this host owns", "worker", e.Key.Worker, "dp_rank", e.Key.DpRank, "error", err)
				continue
			}
			w.listening, w.at = true, time.Now()
			s.system.Logger().Info(logFollowing, "worker", e.Key.Worker, "dp_rank", e.Key.DpRank)
		case !own && w.listening:
			_ = w.ns.pipe.RemoveListener(messages.StreamID{Worker: e.Key.Worker, DpRank: e.Key.DpRank})
			w.listening = false
			s.system.Logger().Info(logHandedOver, "worker", e.Key.Worker, "dp_rank", e.Key.DpRank, "owner", registry.Owner(members, e.Key))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(s.workers), compareKeys) {
		if w := s.workers[k]; !live[k] {
			touched[w.ns] = true
			s.drop(k, w)
		}
	}
	for ns := range touched {
		s.syncCandidates(ns)
	}
}

// adopt makes a registry entry one of this host's workers (its namespace
// created if needed); nil when the namespace's block size differs (two
// hosts registered the model with different sizes at once).
func (s *Service) adopt(e registry.Entry) *worker {
	ns, err := s.space(e.Worker.Model, e.Worker.Tenant, int(e.Worker.BlockSize), true)
	if err != nil || ns.blockSize != int(e.Worker.BlockSize) {
		s.system.Logger().Warn("cluster: registration not followed", "worker", e.Key.Worker, "dp_rank", e.Key.DpRank,
			"model", e.Worker.Model, "block_size", e.Worker.BlockSize, "error", err)
		return nil
	}
	reg := api.Registration{InstanceID: e.Key.Worker, DpRank: e.Key.DpRank, Endpoint: e.Worker.Endpoint,
		ReplayEndpoint: e.Worker.ReplayEndpoint, ModelName: e.Worker.Model, TenantID: e.Worker.Tenant,
		BlockSize: e.Worker.BlockSize, LoraName: e.Worker.Lora, ServingEndpoint: e.Worker.ServingEndpoint,
		Engine: cmp.Or(e.Worker.Engine, s.cfg.Engine), MetricsEndpoint: e.Worker.MetricsEndpoint,
		Role: e.Worker.Role, BootstrapHost: e.Worker.BootstrapHost, BootstrapPort: e.Worker.BootstrapPort,
		Events: e.Worker.Events, CacheBlocks: min(e.Worker.CacheBlocks, predicted.MaxEventLessBlocks)}
	// An event-less worker has nothing to sync: readiness never waits for it.
	w := &worker{reg: reg, ns: ns, at: time.Now(), version: e.Version, synced: reg.EventLess()}
	s.workers[e.Key] = w
	ns.members[e.Key] = true
	return w
}

// drop forgets a worker; the host that followed it also removes it from
// the index — after its listener's batches, through the same front —
// so a late batch never brings it back. Called with s.mu held.
func (s *Service) drop(k messages.WorkerKey, w *worker) {
	if w.listening {
		_ = w.ns.pipe.RemoveListener(messages.StreamID{Worker: k.Worker, DpRank: k.DpRank})
		w.ns.pipe.RemoveWorker(k.Worker)
	}
	s.system.Root.Send(w.ns.route, &routing.DropWorker{Worker: k.Worker})
	delete(w.ns.members, k)
	delete(s.workers, k)
}

// localStates is what this host tells the others about the streams it
// follows (GET /workers on any host).
func (s *Service) localStates() []registry.StreamState {
	s.mu.Lock()
	mine := map[messages.WorkerKey]*worker{}
	for k, w := range s.workers {
		if w.listening {
			c := *w
			mine[k] = &c
		}
	}
	s.mu.Unlock()
	out := make([]registry.StreamState, 0, len(mine))
	for _, k := range slices.SortedFunc(maps.Keys(mine), compareKeys) {
		ri := s.rankInfo(k, mine[k])
		out = append(out, registry.StreamState{Key: k, State: string(ri.State), LastSeq: ri.LastSeq, Warnings: ri.Warnings,
			EngineDetected: ri.EngineDetected, EngineEvidence: ri.EngineEvidence})
	}
	return out
}

// remoteStates asks each owner of a stream this host does not follow for
// its streams' states, concurrently, each bounded by the timeout; an
// owner that does not answer is absent from the map.
func (s *Service) remoteStates(regs map[messages.WorkerKey]*worker) map[messages.WorkerKey]registry.StreamState {
	c := s.cfg.Cluster
	owners := map[string]bool{}
	for k, w := range regs {
		if !w.listening && !w.reg.EventLess() { // an event-less worker has no stream
			owners[c.Owner(k)] = true
		}
	}
	delete(owners, "")
	out := map[messages.WorkerKey]registry.StreamState{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for o := range owners {
		wg.Go(func() {
			states, err := c.States(o, s.cfg.Timeout)
			if err != nil {
				return
			}
			mu.Lock()
			for _, st := range states {
				out[st.Key] = st
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// remoteRankInfo is a stream another host follows, as GET /workers shows
// it: its owner's view of the stream, this host's view of the index.
func (s *Service) remoteRankInfo(k messages.WorkerKey, w *worker, st registry.StreamState, known bool) api.RankInfo {
	ri := api.RankInfo{DpRank: k.DpRank, ModelName: w.ns.key.model, TenantID: w.ns.key.tenant,
		Endpoint: w.reg.Endpoint, ReplayEndpoint: w.reg.ReplayEndpoint, LoraName: w.reg.LoraName, ServingEndpoint: w.reg.ServingEndpoint,
		Engine: w.reg.Engine, BlockSize: uint32(w.ns.blockSize), State: api.StateRecovering, Warnings: []string{}}
	withRole(&ri, w.reg)
	owner := s.cfg.Cluster.Owner(k)
	ri.Owner = owner
	if !known {
		ri.Warnings = append(ri.Warnings, "owner host "+owner+" does not report the stream (hand-over, or not answering)")
	} else {
		ri.State, ri.LastSeq = api.StreamState(st.State), st.LastSeq
		ri.EngineDetected, ri.EngineEvidence = st.EngineDetected, st.EngineEvidence
		ri.Warnings = append(ri.Warnings, st.Warnings...)
	}
	if is, err := w.ns.pipe.IndexStats(s.cfg.Timeout); err == nil {
		ri.Blocks = uint64(is.TreeSizes[k])
	}
	return ri
}
