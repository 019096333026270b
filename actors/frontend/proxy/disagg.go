package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/proxy/pdtransfer"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// DisaggOptions configure the requests the router splits into a remote
// prefill and a decode leg (a route answer with a prefill worker).
type DisaggOptions struct {
	// Protocol is the transfer protocol of every split request: one of
	// pdtransfer.Protocols, or "" / "auto" (the default) for the prefill
	// worker's engine (Engines). A split request whose
	// protocol is not known is served by its decode worker alone.
	Protocol string
	// Engines gives the engine a worker runs, registered or detected
	// (service.EngineOf; nil: none known).
	Engines func(messages.WorkerID) string
	// OnPrefillFailure is what a sequential protocol (vLLM, TensorRT-LLM)
	// does when its prefill leg fails (and is not, or no longer, retried):
	// PrefillFallbackLocal (the default) sends the client's request to the
	// decode worker alone, PrefillFail answers 502. SGLang's decode
	// engines cannot prefill alone: a failed prefill leg is a 502 there
	// either way.
	OnPrefillFailure string
	// PrefillRetries is how many times a prefill leg that failed before
	// any byte reached the client (unreachable, 5xx, broken off, no
	// transfer params) is retried on the route answer's alternate prefill
	// worker: 0 (the zero value: none) or 1 (kvrouter serve's default). A
	// retry moves the prefill booking there and is one of the request
	// path's retries (its fleet-wide budget and backoff). OnPrefillFailure
	// applies when none is made or it fails too.
	PrefillRetries int
	// Rand is the source of SGLang's rooms and TensorRT-LLM's request ids
	// (default crypto/rand.Reader).
	Rand io.Reader
}

// DisaggOptions.OnPrefillFailure values.
const (
	PrefillFallbackLocal = "fallback-local"
	PrefillFail          = "fail"
)

// ProtocolAuto is DisaggOptions.Protocol's default: the prefill worker's
// engine, registered or detected.
const ProtocolAuto = "auto"

func (o *DisaggOptions) check() error {
	if o.Protocol == "" {
		o.Protocol = ProtocolAuto
	}
	if _, ok := pdtransfer.ForEngine(o.Protocol); !ok && o.Protocol != ProtocolAuto {
		return fmt.Errorf("proxy: disaggregation protocol %q, want auto or one of %v", o.Protocol, pdtransfer.Protocols)
	}
	switch o.OnPrefillFailure {
	case "":
		o.OnPrefillFailure = PrefillFallbackLocal
	case PrefillFallbackLocal, PrefillFail:
	default:
		return fmt.Errorf("proxy: on prefill failure %q, want %s or %s", o.OnPrefillFailure, PrefillFallbackLocal, PrefillFail)
	}
	if o.PrefillRetries < 0 || o.PrefillRetries > MaxPrefillRetries {
		return fmt.Errorf("proxy: prefill retries %d, want 0..%d (one alternate prefill worker)", o.PrefillRetries, MaxPrefillRetries)
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	return nil
}

// Prefill leg outcomes (kvrouter_proxy_prefill_legs_total{outcome}) and
// the reasons a split request was served without a remote prefill
// (kvrouter_proxy_prefill_fallbacks_total{reason}: these and the failed
// outcomes).
const (
	PrefillOK          = "ok"
	PrefillConnect     = "connect_failed"   // the prefill engine could not be reached
	PrefillStatus      = "bad_status"       // it answered other than 2xx
	PrefillBadAnswer   = "bad_answer"       // its answer lacks the protocol's transfer params
	PrefillTooLarge    = "answer_too_large" // its answer is over pdtransfer.MaxAnswerBytes
	PrefillDied        = "engine_died"      // its answer broke off
	PrefillCanceled    = "canceled"         // the client went away, or the decode leg ended first
	PrefillFinished    = "finished"         // the prefill engine finished the request itself (TensorRT-LLM)
	NoProtocol         = "unknown_protocol" // the prefill worker's engine has no known protocol
	PrefillNotBuilt    = "not_built"        // the leg could not be built (SGLang without a bootstrap host)
	BadPrefillEndpoint = "bad_prefill_endpoint"
	ErrPrefillFailed   = "prefill_failed" // the client's error code when no fallback was made
)

// The spans of a split request's legs, children of the request's span.
const (
	SpanPrefill = "kvrouter.proxy.prefill_leg"
	SpanDecode  = "kvrouter.proxy.decode_leg"
)

// The legs' span attributes: the transfer protocol; the prefill leg's
// attempt (1, or 2 when retried on the alternate prefill worker).
var (
	spanProtocol = attribute.Key("kvrouter.protocol")
	spanAttempt  = attribute.Key("kvrouter.prefill_attempt")
)

// tracer is the tracer of the request's span (the process's provider).
func tracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/kvrouter/kvrouter/actors/frontend/proxy")
}

// split serves a request the router split: the prefill leg, then (or, for
// SGLang, at once) the decode leg on the booking's candidates, whose
// answer the client gets. A prefill leg that fails before any byte reached
// the client is retried on the booking's alternate prefill worker
// (retryPrefill); when that is not done or fails too, prefillFailed
// answers. body is the client's (its transfer fields stripped).
func (p *Proxy) split(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, body []byte) {
	ctx := r.Context()
	parsed, err := pdtransfer.Parse(body)
	if err != nil { // completions read it as an object already
		writeError(w, http.StatusBadRequest, api.ReasonBadJSON, err.Error())
		return
	}
	leg := b.Prefill
	for attempt := 1; ; attempt++ {
		proto, ok := p.protocol(leg)
		if !ok {
			p.local(w, r, b, body, "", NoProtocol)
			return
		}
		ep, err := serving.Parse(leg.ServingEndpoint)
		if err != nil {
			p.local(w, r, b, body, proto, BadPrefillEndpoint)
			return
		}
		host := leg.BootstrapHost
		if host == "" {
			host, _, _ = net.SplitHostPort(ep.HostPort)
		}
		legs, err := pdtransfer.Build(proto, parsed, pdtransfer.Prefill{BootstrapHost: host, BootstrapPort: leg.BootstrapPort}, p.opts.Disagg.Rand)
		if err != nil {
			p.opts.Logger.Warn("proxy: prefill leg not built", "request_id", b.ID, "protocol", proto, "error", err)
			p.local(w, r, b, body, proto, PrefillNotBuilt)
			return
		}
		pl := prefillAttempt{leg: leg, ep: ep, n: attempt}
		var outcome string
		var failure error
		if proto.Sequential() {
			var decode []byte
			outcome, failure = p.prefillLeg(ctx, r, b, pl, proto, legs.Prefill, func(answer []byte) (err error) {
				decode, err = pdtransfer.Decode(legs, parsed, answer)
				return err
			})
			if outcome == PrefillOK {
				p.decodeLeg(w, r, b, proto, decode)
				return
			}
		} else if outcome, failure = p.together(w, r, b, pl, legs); outcome == PrefillOK {
			return
		}
		if outcome == PrefillCanceled {
			return // the client went away; the booking is freed by the caller
		}
		if next := p.retryPrefill(ctx, b, proto, outcome, failure, attempt); next != nil {
			leg = next
			continue
		}
		if ctx.Err() != nil {
			return
		}
		p.prefillFailed(w, r, b, body, proto, outcome)
		return
	}
}

// prefillFailed answers a split request whose prefill leg failed (and
// was not, or no longer, retried): on the decode worker alone
// (fallback-local, and always when the prefill engine finished the
// request itself), or 502 prefill_failed (fail, and always for SGLang,
// whose decode engines cannot prefill alone).
func (p *Proxy) prefillFailed(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, body []byte, proto pdtransfer.Protocol, outcome string) {
	switch {
	case outcome == PrefillFinished: // not a failure: the decode worker answers in the client's shape
		p.local(w, r, b, body, proto, PrefillFinished)
	case !proto.Sequential() || p.opts.Disagg.OnPrefillFailure == PrefillFail:
		p.metrics.fallback(r.Context(), proto, outcome, false)
		w.Header().Set(RequestIDHeader, b.ID)
		writeError(w, http.StatusBadGateway, ErrPrefillFailed, fmt.Sprintf("the prefill leg failed (%s)", outcome))
	default:
		p.local(w, r, b, body, proto, outcome)
	}
}

// protocol is the split request's transfer protocol.
func (p *Proxy) protocol(leg *api.PrefillLeg) (pdtransfer.Protocol, bool) {
	name := p.opts.Disagg.Protocol
	if name == ProtocolAuto {
		if p.opts.Disagg.Engines == nil {
			return "", false
		}
		name = p.opts.Disagg.Engines(leg.WorkerID)
	}
	return pdtransfer.ForEngine(name)
}

// local serves a split request on its decode worker alone (its own
// prefill), counted with why.
func (p *Proxy) local(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, body []byte, proto pdtransfer.Protocol, why string) {
	p.metrics.fallback(r.Context(), proto, why, true)
	p.opts.Logger.Warn("proxy: split request served without its remote prefill", "request_id", b.ID, "protocol", proto, "reason", why,
		"prefill_worker", b.Prefill.WorkerID)
	p.decodeLeg(w, r, b, proto, body)
}

// decodeLeg forwards body to the decode candidates under a span of its own.
func (p *Proxy) decodeLeg(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, proto pdtransfer.Protocol, body []byte) {
	ctx, span := tracer(r.Context()).Start(r.Context(), SpanDecode, trace.WithAttributes(spanProtocol.String(string(proto))))
	defer span.End()
	p.forward(w, r.WithContext(ctx), b, body)
}

// prefillLeg sends a prefill leg and reads its whole answer (at most
// pdtransfer.MaxAnswerBytes), which use (when set) takes the decode leg's
// params from: an error there is a bad answer. It returns the outcome and
// the failure's error (a statusError for a non-2xx answer).
func (p *Proxy) prefillLeg(ctx context.Context, r *http.Request, b *requestpath.Booking, pa prefillAttempt, proto pdtransfer.Protocol,
	body []byte, use func([]byte) error) (string, error) {
	start := time.Now()
	ctx, span := tracer(ctx).Start(ctx, SpanPrefill, trace.WithAttributes(spanProtocol.String(string(proto)),
		tracectx.Worker.Int64(int64(pa.leg.WorkerID)), tracectx.DpRank.Int64(int64(pa.leg.DpRank)),
		attribute.String("kvrouter.prefill_endpoint", pa.ep.String()), spanAttempt.Int(pa.n)))
	defer span.End()
	answer, outcome, err := p.readPrefill(ctx, r, b.ID, pa.ep, body)
	if outcome == PrefillOK && use != nil {
		switch err = use(answer); {
		case errors.Is(err, pdtransfer.ErrFinished):
			outcome = PrefillFinished
		case err != nil:
			outcome = PrefillBadAnswer
		}
	}
	if outcome != PrefillOK {
		span.SetStatus(codes.Error, outcome)
		if outcome != PrefillCanceled {
			p.opts.Logger.Warn("proxy: prefill leg failed", "request_id", b.ID, "protocol", proto, "prefill_worker", pa.leg.WorkerID,
				"endpoint", pa.ep.String(), "attempt", pa.n, "outcome", outcome, "error", err)
		}
	}
	span.SetAttributes(attribute.String("kvrouter.prefill_outcome", outcome))
	p.metrics.prefillDone(ctx, proto, outcome, time.Since(start))
	return outcome, err
}

func (p *Proxy) readPrefill(ctx context.Context, r *http.Request, id string, ep serving.Endpoint, body []byte) ([]byte, string, error) {
	resp, err := p.post(ctx, r, id, ep.BaseURL(), body)
	if err != nil {
		if ctx.Err() != nil {
			return nil, PrefillCanceled, err
		}
		return nil, PrefillConnect, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, pdtransfer.MaxAnswerBytes+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, PrefillCanceled, err
	case err != nil:
		return nil, PrefillDied, err
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, PrefillStatus, statusError(resp.StatusCode)
	case buf.Len() > pdtransfer.MaxAnswerBytes:
		return nil, PrefillTooLarge, fmt.Errorf("more than %d bytes", pdtransfer.MaxAnswerBytes)
	}
	return buf.Bytes(), PrefillOK, nil
}

// together runs SGLang's legs at once: the prefill leg's answer is read
// and dropped, the decode leg's goes to the client. A prefill leg that
// fails before the client's answer started cancels the decode leg and
// returns its outcome and error, nothing written to the client (the
// caller retries or answers); once the answer started, the decode engine
// ends it (its transfer fails with the prefill) and PrefillOK is returned.
func (p *Proxy) together(w http.ResponseWriter, r *http.Request, b *requestpath.Booking, pa prefillAttempt, legs pdtransfer.Legs) (string, error) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	gw := &gatedWriter{w: w, hdr: http.Header{}}
	type result struct {
		outcome string
		err     error
	}
	failed := make(chan result, 1)
	go func() {
		outcome, err := p.prefillLeg(ctx, r, b, pa, legs.Protocol, legs.Prefill, nil)
		if outcome != PrefillOK && outcome != PrefillCanceled && gw.abort() {
			cancel()
		}
		failed <- result{outcome, err}
	}()
	p.decodeLeg(gw, r.WithContext(ctx), b, legs.Protocol, legs.Decode)
	if !gw.aborted() {
		cancel() // the answer is over: a prefill leg still out has nothing left to give
		<-failed
		return PrefillOK, nil
	}
	res := <-failed
	return res.outcome, res.err
}

// errAborted: the gated writer's answer was given up (its prefill leg
// failed first).
var errAborted = errors.New("proxy: the answer was given up: its prefill leg failed")

// gatedWriter holds a decode leg's answer back from the client until its
// first WriteHeader, and lets a failed prefill leg give the answer up
// before that (abort): then nothing the decode leg writes reaches the
// client, which gets the proxy's error instead.
type gatedWriter struct {
	w   http.ResponseWriter
	hdr http.Header

	mu        sync.Mutex
	committed bool
	gaveUp    bool
}

// Header is the answer's header until it is committed.
func (g *gatedWriter) Header() http.Header { return g.hdr }

// WriteHeader commits the answer to the client, unless it was given up.
func (g *gatedWriter) WriteHeader(code int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gaveUp || g.committed {
		return
	}
	g.committed = true
	for k, v := range g.hdr {
		g.w.Header()[k] = v
	}
	g.w.WriteHeader(code)
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	g.WriteHeader(http.StatusOK)
	if g.aborted() {
		return 0, errAborted
	}
	return g.w.Write(b)
}

// FlushError flushes a committed answer (http.ResponseController's hook).
func (g *gatedWriter) FlushError() error {
	g.mu.Lock()
	ok := g.committed && !g.gaveUp
	g.mu.Unlock()
	if !ok {
		return nil
	}
	return http.NewResponseController(g.w).Flush()
}

// abort gives the answer up if nothing of it reached the client yet.
func (g *gatedWriter) abort() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.committed {
		return false
	}
	g.gaveUp = true
	return true
}

func (g *gatedWriter) aborted() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gaveUp
}

// stripTransferFields removes the transfer fields a client put in its
// body (pdtransfer.ClientFields), counting each; the body is returned
// untouched when it has none.
func (p *Proxy) stripTransferFields(ctx context.Context, body []byte) []byte {
	has := false
	for _, f := range pdtransfer.ClientFields {
		if bytes.Contains(body, []byte(`"`+f+`"`)) {
			has = true
			break
		}
	}
	if !has {
		return body
	}
	parsed, err := pdtransfer.Parse(body)
	if err != nil {
		return body // the caller refuses it
	}
	found := parsed.Strip()
	if len(found) == 0 {
		return body // the name was inside a value
	}
	for _, f := range found {
		p.metrics.clientField(ctx, f)
	}
	p.opts.Logger.Warn("proxy: transfer fields removed from a client's body", "fields", found)
	return parsed.Encode()
}
