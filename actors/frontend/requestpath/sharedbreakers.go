package requestpath

import "github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"

// Breakers across router hosts: a breaker that opens on one host on the
// failures it saw opens the same endpoint's breaker on every other host
// (kvrouter serve wires ShareTrips to the cluster), so the cluster stops
// sending a failing engine requests at once instead of each host paying
// its own run of failures. Each host then half-opens after its own
// cool-down and closes on its own probes: a probe is one request, and a
// host that saw the engine recover need not wait for another's verdict.
// Only failure-driven trips are shared; a failing health check is seen
// by every host's own checks.

// ShareTrips sets push, called (outside the Guard's lock) with the
// endpoint each time a breaker here opens on the failures this host saw;
// nil stops sharing.
func (g *Guard) ShareTrips(push func(hostPort string)) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.push = push
}

// RemoteTrip opens hostPort's breaker because another host's opened: it
// is counted, and never pushed on again.
func (g *Guard) RemoteTrip(hostPort string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts.remoteTrips++
	if b := g.breaker(hostPort); b != nil && b.Trip(g.cfg.Now()) {
		g.counts.transition(guard.Open)
	}
}
