package service

import (
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
)

// EngineOf is the engine worker id runs: its registration's engine choice
// (the server's --engine default applied), or — for a registration left
// to auto — the engine its KV event stream showed ("" when none is known
// yet, or the worker is not registered here). The proxy's transfer
// protocol for a split request follows it. An auto registration costs one
// question to its stream's normalizer.
func (s *Service) EngineOf(id messages.WorkerID) string {
	s.mu.Lock()
	var found *worker
	var key messages.WorkerKey
	for k, w := range s.workers {
		if k.Worker == id && (found == nil || k.DpRank < key.DpRank) {
			found, key = w, k
		}
	}
	var choice string
	if found != nil {
		choice = found.reg.Engine
	}
	s.mu.Unlock()
	if found == nil || (choice != "" && choice != engine.Auto) || (s.cfg.Cluster != nil && !found.listening) {
		return choice
	}
	ns, err := found.ns.pipe.NormalizerStats(messages.StreamID{Worker: key.Worker, DpRank: key.DpRank}, s.cfg.Timeout)
	if err != nil {
		return choice
	}
	return ns.StreamEngine.Detected
}
