// Package service is the router's composition root, used by cmd/kvrouter
// and bench/: Host (host.go) assembles a whole router — cluster
// membership, this Service, the first registrations, metrics — and the
// Service implements api.Backend over the actors. Each namespace (model_name, tenant_id)
// has its own ingest pipeline (listeners → normalizers → coalescers → index
// and session lineage index) and its own route actor; registration spawns the worker's listener in its
// namespace. The registry of workers lives here, at the HTTP edge, under a
// mutex: it is configuration, not actor state, and no actor reads it.
// README.md beside this file gives the rules: namespaces, the registry,
// warm start, the route path, sessions, and what changes in a cluster.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/decisionlog"
	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/cluster/registry"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
)

// Config configures the service.
type Config struct {
	// BlockSize is used for registrations that name none.
	BlockSize int
	// DecisionLog is how many routing decisions GET /decisions and the
	// fleet page keep (default decisionlog.DefaultCapacity).
	DecisionLog int
	// Engine is the engine choice of registrations that name none
	// (messages/engine: auto, the default, or an engine name).
	Engine string
	// Routing configures every namespace's router, literally: pass
	// routing.DefaultConfig() for the reference's defaults (a zero OverlapWeight means
	// load only).
	Routing routing.Config
	// TierWeights credits a cached block by the storage tier holding it
	// (tiers.go); the zero value is DefaultTierWeights.
	TierWeights *TierWeights
	// Timeout bounds one actor request on the route path (default 50 ms):
	// a request never waits forever on a busy or missing actor. An index
	// query gets 1 µs more per block of its prompt (indexDeadline).
	Timeout time.Duration
	// Pipeline sizes every namespace's pipeline; Pipeline.Sessions bounds
	// its session lineage index (--max-sessions, --session-idle).
	Pipeline pipeline.Config
	// Predictions configures every namespace's predict-on-route table
	// (actors/routing/predicted; the zero value: its defaults, predictions
	// on; TTL predicted.Off: off for workers that publish events).
	Predictions predicted.Config
	// SessionCredit is the weight of a /route request's session lineage
	// (sessions.Index.Credit, --session-credit): the candidate holding the
	// session's newest blocks gets ⌊weight × depth⌋ more overlap blocks
	// before the choice. 0 disables it (session_id is still checked).
	SessionCredit float64
	// SilentAfter is how long a registered worker may send nothing before
	// /workers warns about it (default 30 s).
	SilentAfter time.Duration
	// SyncGrace bounds how long Synced waits for a registered worker's
	// first sync (synced.go) before it stops holding readiness back for it
	// (default 30 s): an engine that is down at start must not keep every
	// other worker's traffic away.
	SyncGrace time.Duration
	// Logger logs what the service notices outside a request (a worker
	// that did not sync in time); nil discards. StartHost passes its own.
	Logger *slog.Logger
	// Signals, when set, scrapes every rank's engine metrics and uses them
	// in the cost and for saturation (signals.go; nil: off).
	Signals *SignalsConfig
	// Cluster, when set (kvrouter serve --cluster), is this member's replica
	// of the cluster's worker registry: registrations made on any host are
	// every host's, and each stream is listened to by its owner only
	// (cluster.go). Nil: one host, the registry is this service's own.
	Cluster *registry.Replica
}

// Service implements api.Backend.
type Service struct {
	system *actor.ActorSystem
	cfg    Config
	stop   chan struct{}
	// disaggCounts counts /route's disaggregation decisions by reason
	// (roles.go).
	disaggCounts disaggCounts

	// writeMu serializes a cluster's registrations (cluster.go), which
	// wait for the other members without holding mu.
	writeMu sync.Mutex

	mu      sync.Mutex
	spaces  map[nsKey]*namespace
	workers map[messages.WorkerKey]*worker
	// remote is the load the other members of a cluster booked, per
	// (worker, dp_rank): the last snapshot (remoteLoads) plus what they
	// pushed since (applyDeltas); nil on one host.
	remote map[messages.WorkerKey]routing.RemoteLoad
	// deltas carries load other members pushed, from the registry's actor
	// to applyDeltas.
	deltas chan registry.RankLoad
	// preds carries predictions other members pushed, from the registry's
	// actor to applyPredictions.
	preds chan registry.Prediction
	// loadDeltas counts the load deltas pushed and received.
	loadDeltas loadDeltaCounts
	// hitsUnknown counts engine hit reports for ranks no longer registered.
	hitsUnknown atomic.Int64
	// peers are the registered peer routers (peers.go), under mu; peerToken
	// is the bearer token sent to them.
	peers     map[string]bool
	peerToken string
	peerLog   *slog.Logger
	// reach is which other cluster members answer this one (reach.go),
	// under mu.
	reach reachability
	// predictionReadErrors counts route actors that missed a metrics
	// scrape (WritePredictionMetrics).
	predictionReadErrors atomic.Int64
	// draining: Ready answers not ready for good (drain.go).
	draining atomic.Bool
	// startSynced: Synced once found every worker it waited for synced, so
	// the start-up gate is open for good (synced.go); under mu.
	startSynced bool
	// scraper reads the engines' metrics (nil: signals off); observed is
	// its latest snapshot, under mu (signals.go).
	scraper  *enginesignals.Scraper
	observed map[messages.WorkerKey]enginesignals.Observation
	// decisions are the latest routing decisions (fleet.go).
	decisions *decisionlog.Log
}

type nsKey struct{ model, tenant string }

// namespace is one (model, tenant): its pipeline, route actor and block size.
type namespace struct {
	key       nsKey
	blockSize int
	pipe      *pipeline.Pipeline
	route     *actor.PID
	members   map[messages.WorkerKey]bool
	// cands is the route actor's candidate list (syncCandidates), for the
	// session credit; replaced, never modified, under Service.mu.
	cands []routing.Candidate
}

type worker struct {
	reg api.Registration
	ns  *namespace
	at  time.Time
	// In a cluster: the registry entry's version, and whether this host
	// follows the stream (owns it and runs its listener).
	version   registry.Version
	listening bool
	// synced: its listener was once subscribed with no replay running, or
	// SyncGrace passed first (synced.go); under Service.mu.
	synced bool
}

// New returns a service whose actors live in system.
func New(system *actor.ActorSystem, cfg Config) (*Service, error) {
	if cfg.BlockSize <= 0 {
		return nil, errors.New("service: block size must be positive")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.SilentAfter <= 0 {
		cfg.SilentAfter = 30 * time.Second
	}
	if cfg.SyncGrace <= 0 {
		cfg.SyncGrace = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Engine == "" {
		cfg.Engine = engine.Auto
	}
	if _, err := engine.Choose(cfg.Engine); err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	if _, err := routing.New(cfg.Routing); err != nil {
		return nil, err
	}
	pt, err := predicted.New(cfg.Predictions)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	cfg.Predictions = pt.Config() // defaults applied
	if !(cfg.SessionCredit >= 0) || math.IsInf(cfg.SessionCredit, 1) {
		return nil, fmt.Errorf("service: session credit %v must be finite and ≥ 0", cfg.SessionCredit)
	}
	s := &Service{system: system, cfg: cfg, stop: make(chan struct{}), deltas: make(chan registry.RankLoad, deltaQueue), preds: make(chan registry.Prediction, predictionQueue),
		spaces: map[nsKey]*namespace{}, workers: map[messages.WorkerKey]*worker{},
		decisions: decisionlog.New(cfg.DecisionLog)}
	if cfg.Signals != nil {
		if err := s.startSignals(); err != nil {
			return nil, err
		}
	}
	go s.followStates()
	if cfg.Cluster != nil {
		cfg.Cluster.ServeStates(s.localStates)
		cfg.Cluster.ServeLoads(s.localLoads)
		cfg.Cluster.ServeBookkeeping(func(id string, free bool) (bool, error) {
			return s.localBookkeeping(routing.Bookkeeping{ID: id, Free: free})
		})
		cfg.Cluster.ServeLoadDeltas(s.queueDelta)
		go s.applyDeltas()
		cfg.Cluster.ServePredictions(s.queuePrediction)
		go s.applyPredictions()
		s.mu.Lock()
		s.reconcile()
		s.mu.Unlock()
		go s.followRegistry()
	}
	return s, nil
}

// stateEvery is how often stream states are passed to the route actors, so
// that decisions flag degraded workers.
const stateEvery = 250 * time.Millisecond

// followStates keeps every route actor's candidates' Degraded flags in step
// with their streams' states and, in a cluster, their remote load with what
// the other members booked.
func (s *Service) followStates() {
	t := time.NewTicker(stateEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			remote := s.remoteLoads()
			s.mu.Lock()
			s.remote = remote
			s.followSignals()
			for _, ns := range s.spaces {
				s.syncCandidates(ns)
			}
			s.mu.Unlock()
		}
	}
}

// Close stops every namespace's actors.
func (s *Service) Close() {
	close(s.stop)
	if s.scraper != nil {
		s.scraper.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range s.spaces {
		ns.pipe.Stop()
		_ = s.system.Root.StopFuture(ns.route).Wait()
	}
}

func tenantOf(t string) string {
	if t == "" {
		return api.DefaultTenant
	}
	return t
}

// space returns the namespace, creating it (with blockSize) when create.
func (s *Service) space(model, tenant string, blockSize int, create bool) (*namespace, error) {
	k := nsKey{model, tenantOf(tenant)}
	if ns, ok := s.spaces[k]; ok {
		return ns, nil
	}
	if !create {
		return nil, api.Errorf(api.ErrNotFound, "unknown_namespace", "no worker is registered for model %q, tenant %q", k.model, k.tenant)
	}
	pc := s.cfg.Pipeline
	// The cluster's shard grains are per namespace; the length prefix keeps
	// ("a/b", "c") and ("a", "b/c") apart.
	pc.Namespace = fmt.Sprintf("%d:%s/%s", len(k.model), k.model, k.tenant)
	props, err := routing.PredictingProps(s.cfg.Routing, s.cfg.Predictions)
	if err != nil {
		return nil, err
	}
	// The route actor follows the index: applied events confirm and kill
	// its predictions. With predictions off for event-publishing workers
	// there is nothing for an event to confirm (event-less workers publish
	// none), so it does not follow: the batches would only queue in front
	// of route requests.
	route := s.system.Root.Spawn(props)
	if s.cfg.Predictions.TTL != predicted.Off {
		pc.Followers = append(slices.Clone(pc.Followers), route)
	}
	pipe, err := pipeline.Start(s.system, pc)
	if err != nil {
		_ = s.system.Root.StopFuture(route).Wait()
		return nil, err
	}
	ns := &namespace{key: k, blockSize: blockSize, pipe: pipe, route: route,
		members: map[messages.WorkerKey]bool{}}
	s.spaces[k] = ns
	return ns, nil
}

// Register implements api.Backend: it spawns the worker's listener.
func (s *Service) Register(_ context.Context, reg api.Registration) error {
	if s.cfg.Cluster != nil {
		return s.registerClustered(reg)
	}
	return s.register(reg, nil)
}

// register spawns a worker's listener; resume, when set, continues the
// stream at a position whose state the index holds (Bootstrap).
func (s *Service) register(reg api.Registration, resume *messages.Position) error {
	if err := s.withEngine(&reg); err != nil {
		return err
	}
	if err := withRoleChecked(&reg); err != nil {
		return err
	}
	bs := int(reg.BlockSize)
	if bs == 0 {
		bs = s.cfg.BlockSize
	}
	key := messages.WorkerKey{Worker: reg.InstanceID, DpRank: reg.DpRank}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, dup := s.workers[key]; dup {
		return api.Errorf(api.ErrConflict, "already_registered",
			"worker %d rank %d is already registered (model %q, tenant %q)", key.Worker, key.DpRank, w.ns.key.model, w.ns.key.tenant)
	}
	ns, err := s.space(reg.ModelName, reg.TenantID, bs, true)
	if err != nil {
		return err
	}
	if ns.blockSize != bs {
		return api.Errorf(api.ErrInvalid, "block_size_mismatch",
			"model %q tenant %q uses block size %d, not %d", ns.key.model, ns.key.tenant, ns.blockSize, bs)
	}
	if reg.EventLess() {
		if err := checkEventLess(reg); err != nil {
			return err
		}
	} else if err := s.listen(ns, reg, bs, resume); err != nil {
		return err
	}
	// An event-less worker has nothing to sync: readiness never waits for it.
	s.workers[key] = &worker{reg: reg, ns: ns, at: time.Now(), synced: reg.EventLess()}
	ns.members[key] = true
	s.syncCandidates(ns)
	return nil
}

// withEngine gives a registration that names no engine the default one
// (Config.Engine) and checks the choice.
func (s *Service) withEngine(reg *api.Registration) error {
	reg.Engine = cmp.Or(reg.Engine, s.cfg.Engine)
	if _, err := engine.Choose(reg.Engine); err != nil {
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "%v", err)
	}
	return nil
}

// listenerConfig is the listener of a registration whose namespace uses
// block size bs.
func (s *Service) listenerConfig(reg api.Registration, bs int, resume *messages.Position) listener.Config {
	return listener.Config{
		Stream:         messages.StreamID{Worker: reg.InstanceID, DpRank: reg.DpRank},
		Engine:         reg.Engine,
		Endpoint:       reg.Endpoint,
		ReplayEndpoint: reg.ReplayEndpoint,
		Bind:           reg.Bind,
		Topic:          reg.Topic,
		BlockSize:      bs,
		Resume:         resume,
	}
}

// syncCandidates sends the namespace's candidates to its route actor, in a
// stable order (the router is fastest with the same list every time), with
// each one's Degraded flag from its stream's state. Called with s.mu held.
func (s *Service) syncCandidates(ns *namespace) {
	keys := slices.SortedFunc(maps.Keys(ns.members), compareKeys)
	status, _ := ns.pipe.Status(s.cfg.Timeout)
	cands := make([]routing.Candidate, len(keys))
	var eventLess map[messages.WorkerKey]int
	now := time.Now()
	for i, k := range keys {
		if w := s.workers[k]; w != nil && w.reg.EventLess() {
			if eventLess == nil {
				eventLess = map[messages.WorkerKey]int{}
			}
			eventLess[k] = int(w.reg.CacheBlocks)
		}
		cands[i] = routing.Candidate{Key: k}
		if w := s.workers[k]; w != nil {
			cands[i].Role = w.reg.Role
		}
		if status != nil {
			st := status.Streams[messages.StreamID{Worker: k.Worker, DpRank: k.DpRank}].State
			cands[i].Degraded = st == coalescer.StateDegraded
		}
		cands[i].Remote = s.remote[k]
		cands[i].Reported = s.reported(k, ns.blockSize, now)
	}
	ns.cands = cands
	s.system.Root.Send(ns.route, &routing.SetCandidates{Candidates: cands, EventLess: eventLess})
}

// compareKeys orders (worker, dp_rank) keys.
func compareKeys(a, b messages.WorkerKey) int {
	return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.DpRank, b.DpRank))
}

// Unregister implements api.Backend.
func (s *Service) Unregister(_ context.Context, ref api.WorkerRef) error {
	if s.cfg.Cluster != nil {
		return s.unregisterClustered(ref)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []messages.WorkerKey
	for k, w := range s.workers {
		if matches(ref, k, w.ns.key) {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		return unknownWorker(ref)
	}
	for _, k := range gone {
		w := s.workers[k]
		_ = w.ns.pipe.RemoveListener(messages.StreamID{Worker: k.Worker, DpRank: k.DpRank})
		w.ns.pipe.RemoveWorker(k.Worker)
		s.system.Root.Send(w.ns.route, &routing.DropWorker{Worker: k.Worker})
		delete(w.ns.members, k)
		delete(s.workers, k)
		s.syncCandidates(w.ns)
	}
	return nil
}

// matches reports whether a registered stream of namespace ns is one an
// unregistration names.
func matches(ref api.WorkerRef, k messages.WorkerKey, ns nsKey) bool {
	return k.Worker == ref.InstanceID && ns.model == ref.ModelName &&
		(ref.TenantID == "" || ns.tenant == ref.TenantID) && (ref.DpRank == nil || k.DpRank == *ref.DpRank)
}

func unknownWorker(ref api.WorkerRef) error {
	return api.Errorf(api.ErrNotFound, "unknown_worker", "worker %d is not registered for model %q", ref.InstanceID, ref.ModelName)
}

func (s *Service) errTimeout(what string, err error) error {
	return api.Errorf(api.ErrUnavailable, "timeout", "%s: %v", what, err)
}

var _ api.Backend = (*Service)(nil)

// Ready implements api.Backend: the actor system answers and, in a
// cluster, this member can exchange messages with the members the provider
// lists: its own advertised address accepts connections (the others answer
// it there) and every other member answered it within reachGrace. Not
// ready is a client-facing ErrUnavailable (reason members_unreachable)
// saying which.
func (s *Service) Ready(context.Context) error {
	if s.system == nil {
		return fmt.Errorf("no actor system")
	}
	if s.draining.Load() {
		return errDraining
	}
	if why := s.clusterNotReady(); why != "" {
		return api.Errorf(api.ErrUnavailable, reasonMembersUnreachable, "%s", why)
	}
	return nil
}
