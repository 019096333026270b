// Package pipeline assembles kvrouter's ingest actors — listeners →
// normalizer pool → coalescer hub → index, which the session lineage index
// follows — in one actor system, and gives the commands and tests one handle
// to add engine endpoints and read state. An endpoint is one engine's
// socket (AddListener), or one socket several registered pods share, told
// apart by topic (AddPod, shared.go: one listener, each pod its own
// stream).
package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/actors/publisher"
	"github.com/kvrouter/kvrouter/actors/reply"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// Config sizes the pipeline.
type Config struct {
	// Normalizers is the normalizer pool size (default 2).
	Normalizers int
	// Limits bound what one payload may allocate.
	Limits wire.Limits
	// Coalescer configures every stream's coalescer.
	Coalescer coalescer.Config
	// Index sizes the one-process index (shard actors) when NewIndex is
	// nil.
	Index indexer.Config
	// NewIndex, when set, starts the namespace's index instead of
	// indexer.Spawn (the cluster index: clusterindex.Node.NewIndex).
	NewIndex func(IndexEnv) Index
	// Namespace names the pipeline's namespace for NewIndex (a cluster
	// index's grain identities); "" is one default namespace.
	Namespace string
	// PublishRouterEvents, when set, binds a ZeroMQ PUB there and
	// republishes every applied RouterEvent (package publisher).
	PublishRouterEvents string
	// Sessions configures the session lineage index (bounds, clock,
	// expiry timer).
	Sessions sessions.ActorConfig
	// Followers get every applied batch after the session index (the
	// namespace's route actor, for its predictions).
	Followers []*actor.PID
}

// Pipeline is a running ingest pipeline.
type Pipeline struct {
	system *actor.ActorSystem
	index  Index
	hub    *actor.PID
	// normalizers: a worker's batches go to normalizers[normalizer.Of].
	normalizers []*actor.PID
	publisher   *actor.PID // nil unless router events are republished
	sessions    *actor.PID

	mu        sync.Mutex // listeners: the index's rebuild reads them from its own goroutine
	listeners map[messages.StreamID]*actor.PID
	// shared are the sockets shared by topic, by endpoint (AddPod); pods
	// each of their streams' place.
	shared map[string]*sharedSocket
	pods   map[messages.StreamID]podRef
}

// Start spawns the session index, the index (which forwards every applied
// batch to the session index and the publisher), the coalescer hub and the
// normalizer pool (and the router-event publisher when configured).
func Start(system *actor.ActorSystem, cfg Config) (*Pipeline, error) {
	if cfg.Normalizers <= 0 {
		cfg.Normalizers = 2
	}
	root := system.Root
	p := &Pipeline{system: system, listeners: map[messages.StreamID]*actor.PID{},
		shared: map[string]*sharedSocket{}, pods: map[messages.StreamID]podRef{}}
	if cfg.PublishRouterEvents != "" {
		props, err := publisher.Props(cfg.PublishRouterEvents, "")
		if err != nil {
			return nil, err
		}
		p.publisher = root.Spawn(props)
	}
	p.sessions = root.Spawn(sessions.Props(cfg.Sessions))
	newIndex := cfg.NewIndex
	if newIndex == nil {
		newIndex = localIndex(cfg.Index)
	}
	env := IndexEnv{Root: root, Namespace: cfg.Namespace, Followers: append([]*actor.PID{p.sessions}, cfg.Followers...), Listeners: p.listenerPIDs}
	if p.publisher != nil {
		env.Followers = append([]*actor.PID{p.publisher}, env.Followers...)
	}
	p.index = newIndex(env)
	p.hub = root.Spawn(coalescer.HubProps(p.index.PID(), cfg.Coalescer))
	for range cfg.Normalizers {
		p.normalizers = append(p.normalizers, root.Spawn(normalizer.Props(p.hub, cfg.Limits)))
	}
	return p, nil
}

// AddListener starts a listener for one engine endpoint; its batches go to
// the normalizer pool.
func (p *Pipeline) AddListener(cfg listener.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.listeners[cfg.Stream]; dup {
		return fmt.Errorf("worker %d rank %d already has a listener", cfg.Stream.Worker, cfg.Stream.DpRank)
	}
	if _, shared := p.shared[cfg.Endpoint]; shared {
		return fmt.Errorf("worker %d rank %d: %s is a socket shared by topic: add its pods (AddPod)", cfg.Stream.Worker, cfg.Stream.DpRank, cfg.Endpoint)
	}
	cfg.Next = p.normalizerOf(cfg.Stream)
	props, err := listener.Props(cfg)
	if err != nil {
		return err
	}
	if f, ok := p.index.(FencedIndex); ok {
		f.StartFeed(cfg.Stream)
	}
	p.listeners[cfg.Stream] = p.system.Root.WithGuardian(listenerSupervision).Spawn(props)
	return nil
}

// RemoveListener stops the listener of one endpoint, or removes a pod
// from its shared socket (AddPod), closing the socket with its last pod.
// The index keeps the stream's blocks until RemoveWorker.
func (p *Pipeline) RemoveListener(s messages.StreamID) error {
	p.mu.Lock()
	pid, ok := p.listeners[s]
	delete(p.listeners, s)
	if ref, pod := p.pods[s]; ok && pod {
		var err error
		pid, err = p.removePod(ref, s)
		if pid == nil {
			p.mu.Unlock()
			return err
		}
	}
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("no listener for worker %d rank %d", s.Worker, s.DpRank)
	}
	return p.system.Root.StopFuture(pid).Wait()
}

// RemoveWorker drops every rank of a worker from the index and the session
// index. (A batch of the worker still on its way to the session index is
// applied after the drop: the session index credits only registered
// workers, and a worker registered again is cleared by its first batch.)
func (p *Pipeline) RemoveWorker(w messages.WorkerID) {
	p.index.RemoveWorker(w)
	p.system.Root.Send(p.sessions, &sessions.DropWorker{Worker: w})
}

// Session returns a session's lineage (found false when the session index
// does not hold it); chain asks for each holder's engine hashes.
func (p *Pipeline) Session(id string, chain bool, timeout time.Duration) (s sessions.Session, found bool, err error) {
	r, err := request[*sessions.GetReply](p.system, p.sessions, &sessions.GetRequest{ID: id, Chain: chain}, timeout)
	if err != nil {
		return sessions.Session{}, false, err
	}
	return r.Session, r.Found, nil
}

// ForgetSession drops a session's lineage; found says whether it was held.
func (p *Pipeline) ForgetSession(id string, timeout time.Duration) (found bool, err error) {
	r, err := request[*sessions.ForgetReply](p.system, p.sessions, &sessions.ForgetRequest{ID: id}, timeout)
	if err != nil {
		return false, err
	}
	return r.Found, nil
}

// SessionCredit returns a route request's session credit among cands
// (sessions.Index.Credit); sessions.Combine adds it to the overlaps. The
// request carries its deadline (now + timeout): the session actor sheds it
// unanswered once that passed (expiry.ErrExpired).
func (p *Pipeline) SessionCredit(id string, weight float64, cands []routing.Candidate, timeout time.Duration) ([]sessions.Bonus, error) {
	c := reply.Make[*sessions.CreditReply](1)
	p.system.Root.Send(p.sessions, &sessions.CreditRequest{ID: id, Weight: weight, Candidates: cands,
		Deadline: time.Now().Add(timeout), Reply: c})
	r, err := c.Wait(timeout)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return r.Bonus, nil
}

// SessionStats returns the session index's counters.
func (p *Pipeline) SessionStats(timeout time.Duration) (*sessions.Stats, error) {
	return request[*sessions.Stats](p.system, p.sessions, &sessions.StatsRequest{}, timeout)
}

// Query asks the index for the overlap of a query's local hashes.
func (p *Pipeline) Query(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, error) {
	return p.index.Query(q, timeout)
}

// QueryCoverage is Query plus which part of the index the answer covers:
// a cluster index answers from the shards that answered in time and flags
// the rest (Coverage.MissingWorker, RecoveringWorker); the one-process
// index always answers whole.
func (p *Pipeline) QueryCoverage(q *indexer.QueryRequest, timeout time.Duration) (*indexer.QueryResult, Coverage, error) {
	if c, ok := p.index.(CoveringIndex); ok {
		return c.QueryCoverage(q, timeout)
	}
	res, err := p.index.Query(q, timeout)
	return res, Coverage{}, err
}

// Dump returns replayable events rebuilding the index.
func (p *Pipeline) Dump(timeout time.Duration) (*indexer.DumpResult, error) {
	return p.index.Dump(timeout)
}

// NormalizerStats returns the counters of the normalizer handling a stream
// (its own in PoolStats.Stream).
func (p *Pipeline) NormalizerStats(s messages.StreamID, timeout time.Duration) (*normalizer.PoolStats, error) {
	p.mu.Lock()
	pid := p.normalizerOf(s)
	p.mu.Unlock()
	return request[*normalizer.PoolStats](p.system, pid, &normalizer.StatsRequest{Stream: s}, timeout)
}

// normalizerOf is the normalizer of a stream's batches: a pod's on a
// shared socket goes to that socket's.
func (p *Pipeline) normalizerOf(s messages.StreamID) *actor.PID {
	if ref, ok := p.pods[s]; ok {
		return ref.socket.next
	}
	return p.normalizers[normalizer.Of(s, len(p.normalizers))]
}

// IndexStats returns the index's counters and per-stream sizes.
func (p *Pipeline) IndexStats(timeout time.Duration) (*indexer.Stats, error) {
	return p.index.Stats(timeout)
}

// listenerSupervision restarts a crashed listener with exponential backoff
// (100 ms × failures in the last minute); its restart resyncs its stream.
var listenerSupervision = actor.NewExponentialBackoffStrategy(time.Minute, 100*time.Millisecond)

// Snapshot returns the index's blocks per (worker, dp_rank).
func (p *Pipeline) Snapshot(timeout time.Duration) (*indexer.Snapshot, error) {
	return p.index.Snapshot(timeout)
}

// Status returns every stream's state.
func (p *Pipeline) Status(timeout time.Duration) (*coalescer.Status, error) {
	return request[*coalescer.Status](p.system, p.hub, &coalescer.StatusRequest{}, timeout)
}

// ListenerStats returns one listener's counters; for a pod of a shared
// socket (AddPod), the pod's view of them (listener.StatsRequest.Pod).
func (p *Pipeline) ListenerStats(s messages.StreamID, timeout time.Duration) (*listener.Stats, error) {
	p.mu.Lock()
	pid, ok := p.listeners[s]
	ref := p.pods[s]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no listener for worker %d rank %d", s.Worker, s.DpRank)
	}
	return request[*listener.Stats](p.system, pid, &listener.StatsRequest{Pod: ref.pod}, timeout)
}

// Stop stops every actor of the pipeline, listeners first.
func (p *Pipeline) Stop() {
	for _, pid := range uniqueListeners(p.listenerPIDs()) {
		_ = p.system.Root.StopFuture(pid).Wait()
	}
	for _, pid := range append(slices.Clone(p.normalizers), p.hub) {
		_ = p.system.Root.StopFuture(pid).Wait()
	}
	p.index.Stop()
	for _, pid := range []*actor.PID{p.sessions, p.publisher} {
		if pid != nil {
			_ = p.system.Root.StopFuture(pid).Wait()
		}
	}
}

// listenerPIDs returns a copy of the listeners by stream.
func (p *Pipeline) listenerPIDs() map[messages.StreamID]*actor.PID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.listeners)
}

func request[T any](system *actor.ActorSystem, pid *actor.PID, msg any, timeout time.Duration) (T, error) {
	var zero T
	res, err := reply.FutureResult(system.Root.RequestFuture(pid, msg, timeout))
	if err != nil {
		return zero, err
	}
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("unexpected answer %T", res)
	}
	return v, nil
}
