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
// accepts the connection, then streams its answer to the client chunk by
// chunk, telling the booking what happens (served, first byte; the caller
// frees it).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, body []byte) {
	ctx := r.Context()
	start := time.Now()
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var resp *http.Response
	var cand requestpath.Candidate
	attempts := min(p.opts.Attempts, len(b.Candidates))
	for i := range attempts {
		cand = b.Candidates[i]
		up, err := http.NewRequestWithContext(upCtx, http.MethodPost, cand.Endpoint.BaseURL()+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			p.metrics.failed(ctx, cand.Key, ErrConnect)
			continue
		}
		copyHeaders(up.Header, r.Header)
		up.Header.Del("Authorization") // the proxy's token is not the engine's
		up.Header.Set(RequestIDHeader, b.ID)
		propagator.Inject(ctx, propagation.HeaderCarrier(up.Header))
		resp, err = p.client.Do(up)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			p.metrics.failed(ctx, cand.Key, ErrCanceled)
			return
		}
		p.metrics.failed(ctx, cand.Key, ErrConnect)
		p.opts.Logger.Warn("proxy: engine unreachable", "worker", cand.Key.Worker, "dp_rank", cand.Key.DpRank,
			"endpoint", cand.Endpoint.String(), "attempt", i+1, "error", err)
	}
	w.Header().Set(RequestIDHeader, b.ID)
	if resp == nil {
		p.metrics.failed(ctx, cand.Key, ErrUnreachable)
		writeError(w, http.StatusBadGateway, ErrUnreachable, fmt.Sprintf("no engine could be reached (%d tried)", attempts))
		return
	}
	defer resp.Body.Close()
	b.Served(ctx, cand.Key)
	if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
		sp.SetAttributes(tracectx.Worker.Int64(int64(cand.Key.Worker)), tracectx.DpRank.Int64(int64(cand.Key.DpRank)),
			attribute.Int64("kvrouter.cached_tokens", int64(b.CachedTokens)), attribute.Int("kvrouter.candidates", len(b.Candidates)))
	}
	copyHeaders(w.Header(), resp.Header)
	w.Header().Set(WorkerHeader, fmt.Sprintf("%d:%d", cand.Key.Worker, cand.Key.DpRank))
	w.WriteHeader(resp.StatusCode)
	p.stream(w, ctx, cancel, b, cand, resp, start)
}

// stream copies the engine's answer to the client, flushing every chunk
// (server-sent events reach the client as the engine sends them). An
// answer that breaks off ends the client's response with an error: an
// SSE error event when streaming, then the connection is aborted so the
// client cannot take it for a complete answer.
func (p *Proxy) stream(w http.ResponseWriter, ctx context.Context, cancel context.CancelFunc, b *requestpath.Booking,
	cand requestpath.Candidate, resp *http.Response, start time.Time) {
	rc := http.NewResponseController(w)
	var idled atomic.Bool
	idle := time.AfterFunc(p.opts.IdleTimeout, func() { idled.Store(true); cancel() })
	defer idle.Stop()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var last time.Time
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			idle.Reset(p.opts.IdleTimeout)
			now := time.Now()
			if last.IsZero() {
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
		}
		if err == io.EOF {
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
