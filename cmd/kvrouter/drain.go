package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/picker"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/service"
)

// DefaultDrainTimeout is how long serve keeps serving after SIGTERM.
const DefaultDrainTimeout = 30 * time.Second

// drainHelp is serve --help's part on stopping.
const drainHelp = `
Stopping: at SIGTERM (or Ctrl-C) serve drains: readiness answers
NOT_SERVING at once (the picker's gRPC health services, GET /readyz 503
draining), so load balancers and gateways take the host out of rotation,
while open ext_proc streams and proxied answers go on and new ones are
still served, for --drain-timeout (a second signal ends it early). Then
the listeners stop: what is still open gets a few seconds more, is cut,
and its booking freed (the log's "kvrouter serve stopped" line says how
many were open). Give the pod a terminationGracePeriodSeconds above
--drain-timeout.
`

// stopper is what serve stops at the end, in order: the picker (its
// context), then the HTTP servers, each waited for.
type stopper struct {
	logger  *slog.Logger
	svc     *service.Service
	picker  *picker.Server // nil: no picker
	stopEPP context.CancelFunc
	epp     eppListening
	servers []*http.Server
	handled []*trackedHandler // the servers' handlers, waited for after their Close
	paths   []*requestpath.Path
}

// drain runs from the first signal to the stop: readiness off at once,
// serving on until timeout passes, a second signal comes or a picker
// server fails (failed: the picker's errs), then stop.
func (s *stopper) drain(sig os.Signal, timeout time.Duration, sigs <-chan os.Signal, failed <-chan error) {
	s.svc.Drain()
	if s.picker != nil {
		s.picker.Drain()
	}
	for _, srv := range s.servers {
		srv.SetKeepAlivesEnabled(false) // a client's next request opens a connection the load balancer sends elsewhere
	}
	s.logger.Info("kvrouter serve draining: readiness off, still serving", "signal", sig.String(), "drain_timeout", timeout)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-t.C:
	case sig := <-sigs:
		s.logger.Info("second signal: stopping now", "signal", sig.String())
	case err := <-failed:
		s.epp.servers-- // one picker server already returned
		s.logger.Warn("a listener failed while draining: stopping now", "err", err)
	}
	s.stop()
}

// stop ends every listener: requests still open get picker.StopGrace to
// finish, then are cut, and their bookings are freed before stop returns.
func (s *stopper) stop() {
	open := s.inFlight()
	s.stopEPP()
	ctx, cancel := context.WithTimeout(context.Background(), picker.StopGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Go(func() {
			if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
				_ = srv.Close() // cuts the connections: their handlers see their requests canceled and free
			}
		})
	}
	wg.Wait()
	for _, h := range s.handled {
		h.wait()
	}
	if s.epp.servers > 0 {
		if err := s.epp.stopped(); err != nil {
			s.logger.Warn("endpoint picker stopped with an error", "err", err)
		}
	}
	s.logger.Info("kvrouter serve stopped", "open_at_stop", open, "open_after_stop", s.inFlight())
}

// inFlight counts the front ends' bookings whose response has not ended.
func (s *stopper) inFlight() int {
	n := 0
	for _, p := range s.paths {
		if p != nil {
			n += p.InFlight()
		}
	}
	return n
}

// trackedHandler counts the requests its handler is serving, so a stop
// can wait for them after their server closed.
type trackedHandler struct {
	h  http.Handler
	wg sync.WaitGroup
}

func (t *trackedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.wg.Add(1)
	defer t.wg.Done()
	t.h.ServeHTTP(w, r)
}

// wait waits for the handlers still running (their server is closed: no
// new one starts).
func (t *trackedHandler) wait() { t.wg.Wait() }

// addDrainFlags registers --drain-timeout.
func addDrainFlags(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("drain-timeout", DefaultDrainTimeout, "after SIGTERM: how long readiness is off while everything is still served, before the listeners stop (0: stop at once)")
}

// track has s stop srv, and wait for its handlers.
func (s *stopper) track(srv *http.Server) {
	t := &trackedHandler{h: srv.Handler}
	srv.Handler = t
	s.servers = append(s.servers, srv)
	s.handled = append(s.handled, t)
}
