package picker

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// FromPath is the Core over the request path's shared core (what kvrouter
// serve runs): the router's choice and its next best ranks with a serving
// endpoint, the booking following the response.
func FromPath(p *requestpath.Path) Core { return pathCore{p} }

type pathCore struct{ p *requestpath.Path }

func (c pathCore) Pick(ctx context.Context, r Request) (Choice, error) {
	var subset []string
	if r.Subsetted {
		subset = r.Subset
	}
	b, err := c.p.Route(ctx, requestpath.Request{ID: r.ID, Model: r.Model, Tokens: r.Tokens,
		NoTokensReason: r.Reason, EstimatedTokens: r.EstimatedTokens, Subset: subset, RateKey: r.FairnessID,
		Objective: r.Objective, Bytes: int64(r.Bytes)})
	switch {
	case errors.Is(err, requestpath.ErrRateLimited):
		return Choice{}, fmt.Errorf("%w: %w", ErrRateLimited, err)
	case errors.Is(err, requestpath.ErrOverloaded):
		return Choice{}, fmt.Errorf("%w: %w", ErrOverloaded, err) // %w: a Retry-After it carries
	case errors.Is(err, requestpath.ErrNoEndpoint), errors.Is(err, api.ErrNotFound):
		return Choice{}, fmt.Errorf("%w: %v", ErrNoEndpoint, err)
	case errors.Is(err, api.ErrInvalid):
		return Choice{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	case err != nil:
		return Choice{}, err
	}
	if first := b.Candidates[0].Key; b.Worker() != first {
		// The router's choice has no serving endpoint or is outside the
		// subset: the request goes to the first candidate, so the booking
		// does too, whether or not the data plane reports where it served.
		b.Served(ctx, first)
	}
	n := min(len(b.Candidates), max(r.MaxEndpoints, 1))
	eps := make([]string, n)
	for i, cd := range b.Candidates[:n] {
		eps[i] = cd.Endpoint.HostPort
	}
	return Choice{Endpoints: eps, CachedTokens: b.CachedTokens, Prefill: prefillHostPort(b.Prefill)}, nil
}

// prefillHostPort is a split request's prefill endpoint as host:port (""
// unsplit, or when the prefill worker registered no usable serving
// endpoint: its sidecar could not reach it, the decode pod prefills).
func prefillHostPort(leg *api.PrefillLeg) string {
	if leg == nil {
		return ""
	}
	ep, err := serving.Parse(leg.ServingEndpoint)
	if err != nil {
		return ""
	}
	return ep.HostPort
}

// booking is the request's booking in flight.
func (c pathCore) booking(id string) (*requestpath.Booking, error) {
	if b := c.p.Lookup(id); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("picker: no booking in flight for %q", id)
}

func (c pathCore) Served(ctx context.Context, id, endpoint string) error {
	b, err := c.booking(id)
	if err == nil {
		b.ServedEndpoint(ctx, endpoint)
	}
	return err
}

func (c pathCore) FirstByte(ctx context.Context, id string) error {
	b, err := c.booking(id)
	if err == nil {
		b.FirstByte(ctx)
	}
	return err
}

// Answered feeds the endpoint's circuit breaker: a 5xx is a failure,
// anything else a success. The endpoint is the served one, or the first
// choice when the data plane did not say.
func (c pathCore) Answered(_ context.Context, id, endpoint string, status int) error {
	b, err := c.booking(id)
	if err != nil {
		return err
	}
	if endpoint == "" {
		endpoint = b.Candidates[0].Endpoint.HostPort
	}
	r := requestpath.EndpointOK
	if status >= 500 {
		r = requestpath.EndpointStatus5xx
	}
	b.ReportEndpoint(endpoint, r)
	return nil
}

// EngineUsage hands the end of the response body to the booking's
// prediction check (requestpath.Booking.EngineUsage).
func (c pathCore) EngineUsage(id string, tail []byte) {
	if b, err := c.booking(id); err == nil {
		b.EngineUsage(tail)
	}
}

func (c pathCore) Done(ctx context.Context, id string) error {
	b, err := c.booking(id)
	if err == nil {
		b.Done(ctx)
	}
	return err
}
