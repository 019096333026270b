package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/frontend/usage"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Error reasons of a forwarded request (kvrouter_proxy_errors_total).
const (
	ErrConnect     = "connect_failed" // the engine could not be reached: the next-best worker is tried
	ErrUnreachable = "no_engine"      // every worker tried failed to connect: 502
	ErrEngineDied  = "engine_died"    // the engine's response broke off mid-way
	ErrIdle        = "idle_timeout"   // the engine sent nothing for IdleTimeout
	ErrCanceled    = "canceled"       // the client went away
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// hopHeaders are not forwarded (RFC 9110 §7.6.1), in either direction.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends the body to the booking's candidates in order until one
// answers, then streams its answer to the client chunk by chunk, telling
// the booking what happens (served, first byte, what each endpoint did;
// the caller frees it). Before any byte reached the client, a failed
// connection or a 502, 503 or 504 moves on to the next candidate — up to
// Options.Attempts tried, within the request path's retry budget, after
// its backoff; the last answer held is passed through when no retry is
// left.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, body []byte) {
	ctx := r.Context()
	start := time.Now()
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var resp *http.Response // the last answer: a retryable one is held until a retry is granted
	var cand requestpath.Candidate
	served, tried, why := -1, 0, ""
	for i := range b.Candidates {
		if tried == p.opts.Attempts {
			b.AttemptsSpent()
			break
		}
		if !b.Try(i) {
			continue // its breaker stopped admitting since the route
		}
		if tried > 0 {
			if err := b.Retry(ctx, tried, why); err != nil {
				b.Release(i) // not sent
				if ctx.Err() != nil {
					p.metrics.failed(ctx, b.Candidates[i].Key, ErrCanceled)
					closeBody(resp)
					return
				}
				break
			}
		}
		closeBody(resp)
		resp, tried = nil, tried+1
		c := b.Candidates[i]
		got, err := p.send(upCtx, r, b, c, body)
		if err != nil {
			if ctx.Err() != nil {
				p.metrics.failed(ctx, c.Key, ErrCanceled)
				return
			}
			b.Report(i, requestpath.EndpointConnectFailed)
			p.metrics.failed(ctx, c.Key, ErrConnect)
			p.opts.Logger.Warn("proxy: engine unreachable", "worker", c.Key.Worker, "dp_rank", c.Key.DpRank,
				"endpoint", c.Endpoint.String(), "attempt", tried, "error", err)
			why = string(requestpath.EndpointConnectFailed)
			continue
		}
		resp, cand, served = got, c, i
		if got.StatusCode >= 500 {
			b.Report(i, requestpath.EndpointStatus5xx)
		}
		if !retryable(got.StatusCode) {
			break
		}
		why = fmt.Sprintf("status_%d", got.StatusCode)
	}
	w.Header().Set(RequestIDHeader, b.ID)
	if resp == nil {
		p.metrics.failed(ctx, b.Candidates[0].Key, ErrUnreachable)
		writeError(w, http.StatusBadGateway, ErrUnreachable, fmt.Sprintf("no engine could be reached (%d tried)", tried))
		return
	}
	defer resp.Body.Close()
	b.Served(ctx, cand.Key)
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(tracectx.Worker.Int64(int64(cand.Key.Worker)), tracectx.DpRank.Int64(int64(cand.Key.DpRank)),
			attribute.Int64("kvrouter.cached_tokens", int64(b.CachedTokens)), attribute.Int("kvrouter.candidates", len(b.Candidates)),
			attribute.Int("kvrouter.attempts", tried))
	}
	copyHeaders(w.Header(), resp.Header)
	w.Header().Set(WorkerHeader, fmt.Sprintf("%d:%d", cand.Key.Worker, cand.Key.DpRank))
	w.WriteHeader(resp.StatusCode)
	p.stream(w, ctx, cancel, b, served, resp, start)
}

// retryable: an engine status retried on the next candidate (the gateway
// statuses that say this engine, not the request, is the trouble).
func retryable(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// send posts the body to candidate c: the response headers, or the
// connection's failure.
func (p *Proxy) send(ctx context.Context, r *http.Request, b *requestpath.Booking, c requestpath.Candidate, body []byte) (*http.Response, error) {
	return p.post(ctx, r, b.ID, c.Endpoint.BaseURL(), body)
}

// post sends the client's request r with body to the engine at base
// (its path, its headers but Authorization, the request id).
func (p *Proxy) post(ctx context.Context, r *http.Request, id, base string, body []byte) (*http.Response, error) {
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, base+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeaders(up.Header, r.Header)
	up.Header.Del("Authorization") // the proxy's token is not the engine's
	up.Header.Set(RequestIDHeader, id)
	propagator.Inject(ctx, propagation.HeaderCarrier(up.Header))
	return p.client.Do(up)
}

func closeBody(resp *http.Response) {
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// stream copies the engine's answer to the client, flushing every chunk
// (server-sent events reach the client as the engine sends them). An
// answer that breaks off ends the client's response with an error: an
// SSE error event when streaming, then the connection is aborted so the
// client cannot take it for a complete answer.
func (p *Proxy) stream(w http.ResponseWriter, ctx context.Context, cancel context.CancelFunc, b *requestpath.Booking,
	served int, resp *http.Response, start time.Time) {
	cand := b.Candidates[served]
	rc := http.NewResponseController(w)
	var idled atomic.Bool
	idle := time.AfterFunc(p.opts.IdleTimeout, func() { idled.Store(true); cancel() })
	defer idle.Stop()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var last time.Time
	var tail usage.Tail // the answer's end, for the engine's reported cached tokens
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			idle.Reset(p.opts.IdleTimeout)
			now := time.Now()
			if last.IsZero() {
				b.Report(served, requestpath.EndpointOK) // a 5xx was reported at its headers
				b.FirstByte(ctx)
				p.metrics.firstToken(ctx, cand.Key, now.Sub(start))
			} else {
				p.metrics.interToken(ctx, cand.Key, now.Sub(last))
			}
			last = now
			if _, werr := w.Write(buf[:n]); werr != nil {
				p.metrics.failed(ctx, cand.Key, ErrCanceled)
				return
			}
			_ = rc.Flush()
			_, _ = tail.Write(buf[:n])
		}
		if err == io.EOF {
			b.Report(served, requestpath.EndpointOK) // an empty answer
			b.EngineUsage(tail.Bytes())
			p.metrics.done(ctx, cand.Key, resp.StatusCode, time.Since(start))
			return
		}
		if err != nil {
			reason := ErrEngineDied
			switch {
			case idled.Load():
				reason = ErrIdle
			case ctx.Err() != nil:
				p.metrics.failed(ctx, cand.Key, ErrCanceled)
				return
			}
			if last.IsZero() {
				b.Report(served, requestpath.EndpointReset)
			}
			p.metrics.failed(ctx, cand.Key, reason)
			p.opts.Logger.Warn("proxy: engine answer broke off", "worker", cand.Key.Worker, "dp_rank", cand.Key.DpRank,
				"request_id", b.ID, "reason", reason, "error", err)
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				fmt.Fprintf(w, "data: {\"error\":{\"message\":\"the engine's answer broke off (%s)\",\"type\":\"server_error\",\"code\":%q}}\n\n", reason, reason)
				_ = rc.Flush()
			}
			b.Done(ctx) // before the abort unwinds: the booking is free when the client sees the end
			panic(http.ErrAbortHandler)
		}
	}
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	dst.Del("Content-Length") // set by the server from what is written
}
