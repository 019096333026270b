package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/actors/frontend/proxy/pdtransfer"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// The retry of a failed prefill leg on the route answer's alternate
// prefill worker (doc.go, "Split requests"): split sends the leg, and on
// a failure asks retryPrefill whether to send it again elsewhere.

// MaxPrefillRetries bounds DisaggOptions.PrefillRetries: a route answer
// names one alternate prefill worker.
const MaxPrefillRetries = 1

// prefillAttempt is one send of a split request's prefill leg: the
// prefill worker, its serving endpoint, and which attempt (1, or 2 on
// the alternate).
type prefillAttempt struct {
	leg *api.PrefillLeg
	ep  serving.Endpoint
	n   int
}

// retryablePrefill: a prefill leg's failure another prefill worker may
// not have — its engine could not be reached, answered 5xx, broke off, or
// answered without the transfer params. A 4xx (the request is the
// trouble), a too large answer and a request the engine finished itself
// are not retried.
func retryablePrefill(outcome string, err error) bool {
	var st statusError
	switch outcome {
	case PrefillConnect, PrefillDied, PrefillBadAnswer:
		return true
	case PrefillStatus:
		return errors.As(err, &st) && st >= 500
	}
	return false
}

// retryPrefill moves the booking's prefill leg to its alternate for
// retry attempt (1 ≤ attempt ≤ PrefillRetries) after a retryable
// failure, within the request path's retry budget and after its backoff:
// the alternate leg, or nil when the leg is not retried. A retryable
// failure that is not retried is logged with why (no alternate named, of
// another protocol, an unusable endpoint, the retry budget spent — also
// counted by the request path —, the client gone, the router refused the
// move).
func (p *Proxy) retryPrefill(ctx context.Context, b *requestpath.Booking, proto pdtransfer.Protocol, outcome string, err error, attempt int) *api.PrefillLeg {
	if attempt > p.opts.Disagg.PrefillRetries || !retryablePrefill(outcome, err) {
		return nil
	}
	leg, why := p.movePrefill(ctx, b, proto, outcome, attempt)
	if leg == nil {
		p.opts.Logger.Info("proxy: prefill leg not retried", "request_id", b.ID, "protocol", proto, "outcome", outcome, "why", why)
		return nil
	}
	p.metrics.prefillRetry(ctx, proto, outcome)
	p.opts.Logger.Info("proxy: prefill leg retried on the alternate", "request_id", b.ID, "protocol", proto, "reason", outcome,
		"prefill_worker", leg.WorkerID, "prefill_endpoint", leg.ServingEndpoint)
	return leg
}

// movePrefill takes the retry and moves the booking's prefill leg to its
// alternate: the alternate leg, or nil and why not.
func (p *Proxy) movePrefill(ctx context.Context, b *requestpath.Booking, proto pdtransfer.Protocol, outcome string, attempt int) (*api.PrefillLeg, string) {
	alt := b.Alternate
	if alt == nil {
		return nil, "no alternate prefill worker"
	}
	if ap, ok := p.protocol(alt); !ok || ap != proto {
		return nil, fmt.Sprintf("the alternate worker %d speaks %q", alt.WorkerID, ap)
	}
	if _, err := serving.Parse(alt.ServingEndpoint); err != nil {
		return nil, fmt.Sprintf("the alternate worker %d's endpoint: %v", alt.WorkerID, err)
	}
	if err := b.Retry(ctx, attempt, "prefill_"+outcome); err != nil {
		return nil, err.Error()
	}
	if leg := b.MovePrefill(ctx); leg != nil {
		return leg, ""
	}
	return nil, "the router did not move the prefill booking"
}

// statusError is a prefill engine's non-2xx answer status.
type statusError int

func (s statusError) Error() string { return fmt.Sprintf("status %d", int(s)) }
