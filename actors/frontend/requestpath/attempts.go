package requestpath

import (
	"context"
	"slices"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
)

// admitted keeps the candidates whose endpoint passes its health checks
// and whose circuit breaker admits a request (the others counted
// skipped, unhealthy or breaker_open), at most MaxCandidates.
func (p *Path) admitted(all []Candidate, skipped Skipped) []Candidate {
	out := make([]Candidate, 0, min(len(all), p.cfg.MaxCandidates))
	for _, c := range all {
		if len(out) == p.cfg.MaxCandidates {
			break
		}
		if why := p.usable(c); why != "" {
			skipped[why]++
			continue
		}
		out = append(out, c)
	}
	return out
}

// usable is why c may not be sent a request now (SkipUnhealthy,
// SkipBreakerOpen), "" when it may.
func (p *Path) usable(c Candidate) string {
	switch {
	case !p.cfg.Guard.Healthy(c.Endpoint.HostPort):
		return SkipUnhealthy
	case !p.cfg.Guard.Admits(c.Endpoint.HostPort):
		return SkipBreakerOpen
	}
	return ""
}

// tickets are a booking's breaker tickets: one per candidate a request
// was sent to and whose outcome is not reported yet.
type tickets struct {
	held map[int]guard.Ticket // by candidate index
}

// tryFirst takes the first candidate's breaker ticket, dropping the
// candidates whose breaker no longer lets a request through (a half-open
// probe slot taken since they were listed); false when none is left.
func (b *Booking) tryFirst() bool {
	for len(b.Candidates) > 0 {
		if b.Try(0) {
			return true
		}
		b.path.metrics.skip(Skipped{SkipBreakerOpen: 1})
		b.Candidates = b.Candidates[1:]
	}
	return false
}

// Try takes candidate i's breaker ticket before the request is sent
// there: false when its breaker does not let it through now (skip it).
// Route took the first candidate's already; a second Try of the same
// candidate is true.
func (b *Booking) Try(i int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.tk.held[i]; ok {
		return true
	}
	t, ok := b.path.cfg.Guard.attempt(b.Candidates[i].Endpoint.HostPort)
	if !ok {
		return false
	}
	if b.tk.held == nil {
		b.tk.held = map[int]guard.Ticket{}
	}
	b.tk.held[i] = t
	return true
}

// Report says what candidate i's endpoint did with the request (its
// breaker counts it); reports after the first for a candidate, or for
// one never tried, are ignored.
func (b *Booking) Report(i int, r EndpointResult) {
	b.mu.Lock()
	t, ok := b.tk.held[i]
	delete(b.tk.held, i)
	b.mu.Unlock()
	if ok {
		b.path.cfg.Guard.record(b.Candidates[i].Endpoint.HostPort, t, r)
	}
}

// Release gives candidate i's ticket back unused: the request was not
// sent there after all.
func (b *Booking) Release(i int) {
	b.mu.Lock()
	t, ok := b.tk.held[i]
	delete(b.tk.held, i)
	b.mu.Unlock()
	if ok {
		b.path.cfg.Guard.release(b.Candidates[i].Endpoint.HostPort, t)
	}
}

// ReportEndpoint is Report by serving endpoint (host:port), for a data
// plane that chose among the candidates itself (the picker's fallbacks):
// a candidate it used without a ticket gets one first. An endpoint that
// is none of the candidates' is ignored.
func (b *Booking) ReportEndpoint(hostPort string, r EndpointResult) {
	i := slices.IndexFunc(b.Candidates, func(c Candidate) bool { return c.Endpoint.HostPort == hostPort })
	if i < 0 {
		return
	}
	b.mu.Lock()
	if _, ok := b.tk.held[i]; !ok {
		t, _ := b.path.cfg.Guard.attempt(hostPort) // it was sent: count it even if the breaker would not have
		if b.tk.held == nil {
			b.tk.held = map[int]guard.Ticket{}
		}
		b.tk.held[i] = t
	}
	b.mu.Unlock()
	b.Report(i, r)
}

// Retry asks for retry n (n ≥ 1) of the request after an attempt that
// got reason (an EndpointResult, or an engine's status as "status_503"):
// the fleet-wide budget must allow it, then the backoff is waited. It
// returns ErrRetryBudget when the budget is spent, the context's error
// when the client went away during the wait; each retry made is counted
// with its reason.
func (b *Booking) Retry(ctx context.Context, n int, reason string) error {
	err := b.path.cfg.Guard.retry(ctx, n)
	switch {
	case err == ErrRetryBudget:
		b.path.metrics.add("retries_refused", "budget", "", 1)
	case err == nil:
		b.path.metrics.add("retries", reason, "", 1)
	}
	return err
}

// AttemptsSpent counts a retry the request wanted past its attempt cap.
func (b *Booking) AttemptsSpent() { b.path.metrics.add("retries_refused", "attempts", "", 1) }

// releaseAll gives back the tickets of candidates whose outcome was
// never reported (the request ended first: the client went away). Called
// with b.mu held.
func (b *Booking) releaseAll() {
	for i, t := range b.tk.held {
		b.path.cfg.Guard.release(b.Candidates[i].Endpoint.HostPort, t)
	}
	b.tk.held = nil
}
