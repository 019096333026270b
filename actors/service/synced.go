package service

import (
	"context"
	"fmt"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// reasonWorkersSyncing is Synced's reason while a worker's first sync runs.
const reasonWorkersSyncing = "workers_syncing"

// Synced reports whether the index has synced the workers this host
// follows, the endpoint picker's readiness beside Ready: every registered
// worker's listener has once been subscribed to its engine with no replay
// running (its start-up replay, when it has a replay endpoint, applied),
// so a route scores what the engines hold rather than an index still
// filling. It is a start-up gate, like the Gateway API Inference
// Extension's "datastore synced": once every worker registered so far has
// synced, it is open for good. A worker registered later (a scale-up, a
// discovered pod, a re-registration) does not take the picker out of
// rotation: it is scored by what its listener has applied so far, as an
// engine that restarts is, and a lost connection is a per-request partial
// answer, not a readiness flap. Until then a worker that has not synced
// SyncGrace after its registration stops holding readiness back (logged
// once), so one engine down at start cannot keep traffic from the others.
// In a cluster only the streams this member follows count; their owners
// gate their own. No workers: synced, and the gate stays shut for the
// first ones (a picker whose discovery has not listed its pods yet).
func (s *Service) Synced(ctx context.Context) error {
	type pending struct {
		k messages.WorkerKey
		w *worker
	}
	var todo []pending
	s.mu.Lock()
	if s.startSynced {
		s.mu.Unlock()
		return nil
	}
	registered := len(s.workers) > 0
	for k, w := range s.workers {
		if !w.synced && (s.cfg.Cluster == nil || w.listening) {
			todo = append(todo, pending{k, w})
		}
	}
	s.mu.Unlock()
	var (
		waiting int
		first   messages.WorkerKey
		why     string
	)
	for _, p := range todo {
		if ctx.Err() != nil {
			return api.Errorf(api.ErrUnavailable, reasonWorkersSyncing, "sync check: %v", ctx.Err())
		}
		ls, err := p.w.ns.pipe.ListenerStats(messages.StreamID{Worker: p.k.Worker, DpRank: p.k.DpRank}, s.cfg.Timeout)
		done := err == nil && !ls.Recovering()
		late := !done && time.Since(p.w.at) > s.cfg.SyncGrace
		if done || late {
			s.mu.Lock()
			if s.workers[p.k] == p.w { // not re-registered meanwhile
				p.w.synced = true
			}
			s.mu.Unlock()
			if late {
				s.cfg.Logger.Warn("worker not synced within the sync grace: readiness no longer waits for it",
					"worker", p.k.Worker, "dp_rank", p.k.DpRank, "grace", s.cfg.SyncGrace)
			}
			continue
		}
		if waiting == 0 {
			first, why = p.k, syncState(err)
		}
		waiting++
	}
	if waiting > 0 {
		return api.Errorf(api.ErrUnavailable, reasonWorkersSyncing, "%d worker ranks still syncing (worker %d rank %d: %s)",
			waiting, first.Worker, first.DpRank, why)
	}
	if registered {
		s.mu.Lock()
		s.startSynced = true
		s.mu.Unlock()
	}
	return nil
}

// syncState says why a rank has not synced yet.
func syncState(err error) string {
	if err != nil {
		return fmt.Sprintf("listener not answering: %v", err)
	}
	return "not subscribed to its engine yet, or its replay is running"
}
