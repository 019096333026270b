package service

import "github.com/kvrouter/kvrouter/messages"

// EngineOf is worker id's registered engine choice (the registration's
// engine, the server's --engine default applied; "" when the worker is
// not registered here): the proxy's transfer protocol for a split request
// follows it.
func (s *Service) EngineOf(id messages.WorkerID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.workers {
		if k.Worker == id {
			return w.reg.Engine
		}
	}
	return ""
}
