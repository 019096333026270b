package picker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/kvrouter/kvrouter/actors/frontend/usage"
	"github.com/kvrouter/kvrouter/messages/tracectx"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Health service names the picker answers (gRPC health checking protocol).
// "" (what load balancers' health checks ask), readiness,
// inference-extension (the name the Gateway API Inference Extension's
// manifests probe) and the ext_proc service's name all say whether the
// picker takes requests; liveness only that the process runs.
const (
	HealthOverall   = ""
	HealthLiveness  = "liveness"
	HealthReadiness = "readiness"
	HealthGIE       = "inference-extension"
)

// HealthExtProc is the ext_proc service's own health name (as readiness).
var HealthExtProc = extprocv3.ExternalProcessor_ServiceDesc.ServiceName

// Config configures a Server.
type Config struct {
	Stream StreamConfig
	// Tokenizer turns prompts into token ids (nil: only token-id prompts
	// are routed on their cache overlap).
	Tokenizer Tokenizer
	// Ready reports whether the router can answer (nil error); it drives
	// the readiness health services. Nil: always ready.
	Ready func(context.Context) error
	// ReadyEvery is how often Ready is asked (default 1 s).
	ReadyEvery time.Duration
	// TLS, when set, is the ext_proc listener's TLS configuration (ALPN
	// h2; actors/certs.ServerConfig); nil serves plaintext h2c.
	TLS *tls.Config
	// Timeout bounds each bookkeeping call (default 1 s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Server is the gRPC shell around Stream: it implements Envoy's
// ExternalProcessor, runs one Stream per ext_proc stream, and carries out
// its actions against a Core. It also serves the gRPC health services.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	cfg     Config
	core    Core
	health  *health.Server
	metrics counters
	prefix  string
	ids     atomic.Uint64
	// draining: readiness stays NOT_SERVING whatever Ready says.
	draining atomic.Bool
}

var tracer = otel.Tracer("github.com/kvrouter/kvrouter/actors/frontend/picker")

// SpanRequest is the span of one request through the picker (headers to
// the end of the response).
const SpanRequest = "kvrouter.epp.request"

// New returns a picker answering from core.
func New(core Core, cfg Config) *Server {
	if cfg.ReadyEvery <= 0 {
		cfg.ReadyEvery = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Stream.MaxBody <= 0 {
		cfg.Stream.MaxBody = DefaultMaxBody
	}
	if cfg.Stream.MaxEndpoints <= 0 {
		cfg.Stream.MaxEndpoints = DefaultMaxEndpoints
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	s := &Server{cfg: cfg, core: core, health: health.NewServer(), prefix: "epp-" + hex.EncodeToString(nonce[:]) + "-"}
	s.health.SetServingStatus(HealthLiveness, healthpb.HealthCheckResponse_SERVING)
	s.setReady(false)
	return s
}

// Defaults of StreamConfig's bounds. One endpoint by default: Envoy's
// ORIGINAL_DST cluster reads a single address from the header; a data plane
// that walks a list on retries (the protocol allows "ip:port,ip:port") can
// be given fallbacks.
const (
	DefaultMaxBody      = 8 << 20
	DefaultMaxEndpoints = 1
)

func (s *Server) setReady(ok bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ok && !s.draining.Load() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range readinessNames {
		s.health.SetServingStatus(name, st)
	}
}

var readinessNames = []string{HealthOverall, HealthReadiness, HealthGIE, HealthExtProc}

// Drain takes the picker out of rotation for good: every readiness name
// answers NOT_SERVING from now on, while streams open and new ones are
// still served (until Serve's context ends).
func (s *Server) Drain() {
	s.draining.Store(true)
	s.setReady(false)
}

// Register adds the ext_proc and health services to g.
func (s *Server) Register(g *grpc.Server) {
	extprocv3.RegisterExternalProcessorServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// StopGrace bounds how long streams still open when Serve's context ends
// may take to finish before they are cut (their bookings are freed).
const StopGrace = 2 * time.Second

// Serve answers on lis until ctx ends, then stops (streams in flight are
// given StopGrace to finish, then cut); once it returns after ctx ended,
// every stream's handler has returned and its booking is freed. With
// Config.TLS the listener serves TLS, else plaintext h2c. The health
// services are served here too (a data plane may health-check the ext_proc
// port) and by ServeHealth.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	// A BUFFERED body comes in one message: let it be as large as the
	// picker accepts. Stop waits for the handlers (they free bookings).
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(s.cfg.Stream.MaxBody + 64<<10), grpc.WaitForHandlers(true)}
	if s.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.TLS)))
	}
	g := grpc.NewServer(opts...)
	s.Register(g)
	go s.followReadiness(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		s.health.Shutdown()
		stopWithin(g, StopGrace)
	}()
	err := g.Serve(lis)
	if ctx.Err() != nil {
		<-stopped
	}
	return err
}

// ServeHealth serves only the health services, in plaintext, on lis until
// ctx ends: kubelet's gRPC probes cannot speak TLS, so they ask here.
func (s *Server) ServeHealth(ctx context.Context, lis net.Listener) error {
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, s.health)
	go func() {
		<-ctx.Done()
		stopWithin(g, StopGrace)
	}()
	return g.Serve(lis)
}

// stopWithin stops g gracefully, cutting what is still open after grace.
func stopWithin(g *grpc.Server, grace time.Duration) {
	t := time.AfterFunc(grace, g.Stop)
	defer t.Stop()
	g.GracefulStop()
}

// followReadiness keeps the readiness services in step with Config.Ready.
func (s *Server) followReadiness(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReadyEvery)
	defer t.Stop()
	for {
		ok := true
		if s.cfg.Ready != nil {
			rc, cancel := context.WithTimeout(ctx, s.cfg.ReadyEvery)
			ok = s.cfg.Ready(rc) == nil
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		s.setReady(ok)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Process implements ExternalProcessor: one ext_proc stream is one HTTP
// request.
func (s *Server) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	s.metrics.inFlight.Add(1)
	defer s.metrics.inFlight.Add(-1)
	id := s.prefix + strconv.FormatUint(s.ids.Add(1), 36)
	r := &run{s: s, srv: srv, st: NewStream(s.cfg.Stream, id), id: id, ctx: srv.Context()}
	defer r.finish()
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == grpccodes.Canceled {
				return nil
			}
			return err
		}
		if h := req.GetRequestHeaders(); h != nil && r.span == nil {
			r.startSpan(h.GetHeaders())
		}
		if b := req.GetResponseBody(); b != nil {
			_, _ = r.tail.Write(b.GetBody())
		}
		if end, err := r.do(r.st.Handle(req)); end {
			return err
		}
	}
}

// run is one stream being served.
type run struct {
	s     *Server
	srv   extprocv3.ExternalProcessor_ProcessServer
	st    *Stream
	id    string
	ctx   context.Context
	span  trace.Span
	first string // the first endpoint chosen
	// tail is the end of the response body the data plane streamed
	// through (the engine's reported cached tokens are there).
	tail usage.Tail
}

// finish frees a booking the stream still holds and ends the span.
func (r *run) finish() {
	r.do(r.st.Reset())
	if r.span != nil {
		r.span.End()
	}
}

// startSpan begins the request's trace, continuing the W3C traceparent the
// data plane forwarded (the request's own header, or the one Envoy's
// tracing set).
func (r *run) startSpan(h *corev3.HeaderMap) {
	if !tracectx.Enabled() {
		return
	}
	ctx := propagation.TraceContext{}.Extract(r.ctx, headerCarrier{h})
	r.ctx, r.span = tracer.Start(ctx, SpanRequest, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("url.path", HeaderValue(h, ":path"))))
}

func (r *run) event(name string, kv ...attribute.KeyValue) {
	if r.span != nil {
		r.span.AddEvent(name, trace.WithAttributes(kv...))
	}
}

// do carries out actions in order; end says the stream is over (err: with
// that status).
func (r *run) do(acts []Action) (end bool, err error) {
	for _, a := range acts {
		switch a.Kind {
		case Send:
			if err := r.srv.Send(a.Response); err != nil {
				r.s.metrics.failures[failSend].Add(1)
				return true, err
			}
		case Route:
			start := time.Now()
			req := a.Request
			var reason string
			req.Tokens, reason = tokens(r.ctx, r.s.cfg.Tokenizer, a.Prompt)
			if req.Reason = reason; req.Tokens != nil {
				req.EstimatedTokens = 0
			}
			c, err := r.s.core.Pick(r.ctx, req)
			if err == nil && len(c.Endpoints) > 0 {
				r.first = c.Endpoints[0]
			}
			if r.span != nil {
				r.span.SetAttributes(attribute.String("gen_ai.request.model", req.Model),
					attribute.Int("kvrouter.tokens", len(req.Tokens)), attribute.Int64("kvrouter.cached_tokens", int64(c.CachedTokens)))
			}
			end, err := r.do(r.st.Decide(Decision{Choice: c, Reason: reason, Err: err}))
			r.s.metrics.observe(time.Since(start))
			if end {
				return true, err
			}
		case Decided:
			r.decided(a)
		case Served:
			ev := bookServed
			if a.Endpoint != r.first {
				ev = bookServedMoved
			}
			r.book(ev, func(ctx context.Context) error { return r.s.core.Served(ctx, r.id, a.Endpoint) })
			r.event("served", attribute.String("kvrouter.endpoint", a.Endpoint))
		case FirstByte:
			r.book(bookFirstByte, func(ctx context.Context) error { return r.s.core.FirstByte(ctx, r.id) })
			r.event("first_byte")
		case Done:
			if u, ok := r.s.core.(UsageReader); ok {
				u.EngineUsage(r.id, r.tail.Bytes())
			}
			r.book(bookDone, func(ctx context.Context) error { return r.s.core.Done(ctx, r.id) })
		case Answered:
			if an, ok := r.s.core.(Answerer); ok {
				_ = an.Answered(r.ctx, r.id, a.Endpoint, a.Status) // a booking already freed has nothing to follow
			}
		case End:
			return true, nil
		case Fail:
			r.s.metrics.failures[failProtocol].Add(1)
			r.s.cfg.Logger.Warn("ext_proc stream closed", "request", r.id, "err", a.Err)
			if r.span != nil {
				r.span.SetStatus(codes.Error, a.Err.Error())
			}
			return true, status.Error(grpccodes.InvalidArgument, a.Err.Error())
		}
	}
	return false, nil
}

func (r *run) decided(a Action) {
	r.s.metrics.decided(a.Outcome, a.Reason)
	if r.span != nil {
		r.span.SetAttributes(attribute.String("kvrouter.outcome", a.Outcome.String()))
		if a.Reason != "" {
			r.span.SetAttributes(attribute.String("kvrouter.load_only_reason", a.Reason))
		}
		if a.Endpoint != "" {
			r.span.SetAttributes(attribute.String("kvrouter.endpoint", a.Endpoint))
		}
		if a.Err != nil && a.Outcome == OutcomeError {
			r.span.SetStatus(codes.Error, a.Err.Error())
		}
	}
	if a.Err != nil {
		level := slog.LevelDebug
		if a.Outcome == OutcomeError {
			level = slog.LevelWarn
		}
		r.s.cfg.Logger.Log(r.ctx, level, "endpoint picker refused a request", "request", r.id, "outcome", a.Outcome.String(), "err", a.Err)
	}
}

// book runs one bookkeeping call, bounded by its own deadline (the stream's
// context may be gone: a reset must still free).
func (r *run) book(ev bookEvent, call func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.s.cfg.Timeout)
	defer cancel()
	if err := call(ctx); err != nil {
		r.s.metrics.failures[failBookkeeping].Add(1)
		r.s.cfg.Logger.Warn("endpoint picker bookkeeping failed", "request", r.id, "event", bookNames[ev], "err", err)
		return
	}
	r.s.metrics.bookings[ev].Add(1)
}

// headerCarrier reads W3C trace headers from ext_proc request headers.
type headerCarrier struct{ h *corev3.HeaderMap }

func (c headerCarrier) Get(key string) string { return HeaderValue(c.h, strings.ToLower(key)) }
func (c headerCarrier) Set(string, string)    {}
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c.h.GetHeaders()))
	for _, h := range c.h.GetHeaders() {
		keys = append(keys, h.GetKey())
	}
	return keys
}
