package picker

import (
	"context"
	"errors"
	"time"
)

// Core is what the picker asks of the router (the consumer's interface:
// the service adapts its request path to it). Pick chooses and books;
// the other three follow the response. The picker calls each bookkeeping
// method at most once per request, and Done exactly once for every Pick
// that succeeded.
type Core interface {
	// Pick routes one request: the serving endpoints ("ip:port") of the
	// chosen worker and of the next best ones, best first. The request's
	// load is booked under r.ID on the first. Errors wrap ErrNoEndpoint,
	// ErrOverloaded or ErrInvalid when they are the answer to give; any
	// other error is an internal one (500).
	Pick(ctx context.Context, r Request) (Choice, error)
	// Served says which endpoint the data plane sent the request to, which
	// differs from the first choice after a retry: the booking moves there.
	Served(ctx context.Context, id, endpoint string) error
	// FirstByte says the first response byte came back: prefill is done.
	FirstByte(ctx context.Context, id string) error
	// Done frees the request's booking (end of the response, an error, or
	// a reset stream).
	Done(ctx context.Context, id string) error
}

// UsageReader is the part of a Core that reads what the engine reported
// at the end of a response (its cached tokens, for the router's
// prediction check): tail is the end of the response body the data plane
// streamed through the picker, given once, before Done.
type UsageReader interface {
	EngineUsage(id string, tail []byte)
}

// Request is one request to route.
type Request struct {
	// ID names the booking (the picker makes one per ext_proc stream).
	ID string
	// Model is the OpenAI body's "model".
	Model string
	// Tokens are the prompt's token ids; nil routes by load only.
	Tokens []uint32
	// EstimatedTokens sizes a request routed by load (its body's length
	// over 4, a token's usual bytes); 0 with tokens.
	EstimatedTokens int
	// Subset, when Subsetted, are the only endpoints the data plane allows
	// (never empty: the picker answers an empty subset itself).
	Subset    []string
	Subsetted bool
	// MaxEndpoints bounds the answer: the chosen one and up to
	// MaxEndpoints-1 fallbacks.
	MaxEndpoints int
	// Reason says why Tokens is nil (a metrics label; "" with tokens).
	Reason string
	// FairnessID is the request's x-gateway-inference-fairness-id (or
	// llm-d's x-llm-d-inference-fairness-id) header: the key its rate
	// limits count it under ("" when neither is sent).
	FairnessID string
	// Objective is the request's x-gateway-inference-objective (or
	// x-llm-d-inference-objective) header: its priority band when it
	// waits in the flow-control queue.
	Objective string
	// Bytes is the request body's size (the queue's byte bound).
	Bytes int
}

// Choice is a routing decision: serving endpoints, best first (at least
// one), the request booked on the first.
type Choice struct {
	Endpoints []string
	// Prefill is the prefill endpoint (host:port) when the router split
	// the request ("" when the destination prefills it): the
	// x-prefiller-host-port header. Its booking ends at FirstByte.
	Prefill string
	// CachedTokens is the chosen worker's cached prefix (for the trace).
	CachedTokens uint64
}

// Errors a Core wraps to say which answer the client gets.
var (
	// ErrNoEndpoint: no ready worker with a serving endpoint (in the
	// subset, when there is one) → 503.
	ErrNoEndpoint = errors.New("no ready endpoint")
	// ErrOverloaded: the request is shed → 429.
	ErrOverloaded = errors.New("overloaded")
	// ErrInvalid: the request cannot be routed as sent → 400.
	ErrInvalid = errors.New("invalid request")
	// ErrRateLimited: the request's key is over its rate limit → 429.
	ErrRateLimited = errors.New("rate limited")
)

// RetryAfterer is an error that says when to try again: a 429 it causes
// carries Retry-After.
type RetryAfterer interface {
	error
	RetryAfter() time.Duration
}

// Answerer is what a Core may add to follow how endpoints answer: the
// status of the response headers, and the endpoint that sent them ("" when
// the data plane did not say: the first choice). The request path's Core
// feeds its circuit breakers from it.
type Answerer interface {
	Answered(ctx context.Context, id, endpoint string, status int) error
}
