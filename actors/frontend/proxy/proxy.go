package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/messages/api"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
)

// Prompts gives a request's prompt token ids (prompttokens.Resolver: the
// request's own ids, the local tokenizer or the engine's).
type Prompts interface {
	Completion(ctx context.Context, model string, p prompttokens.Completion) prompttokens.Result
	Chat(ctx context.Context, model string, c prompttokens.Chat) prompttokens.Result
}

// Options configure a Proxy. Zero values take the defaults noted.
type Options struct {
	// APIToken, when set, is required as "Authorization: Bearer TOKEN" on
	// every endpoint (the HTTP API's --api-token).
	APIToken string
	// Prompts resolves prompts to token ids; nil uses only the ids a
	// request carries (text and chat then route by load).
	Prompts Prompts
	// ConnectTimeout bounds connecting to an engine (default 2 s); a
	// connection that fails is retried on the next-best worker.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for the engine's response headers
	// (default 5 min: a non-streamed answer comes whole).
	HeaderTimeout time.Duration
	// IdleTimeout ends a response whose engine sent nothing for this long
	// (default 5 min).
	IdleTimeout time.Duration
	// Attempts bounds the workers tried per request (default 3, at most
	// the request path's candidates).
	Attempts int
	// MaxConnsPerEngine bounds the connections open to one serving
	// endpoint (default 1024); requests past it wait for one (bounded
	// file descriptors under a burst).
	MaxConnsPerEngine int
	// MaxBodyBytes caps a request body (default 32 MiB).
	MaxBodyBytes int64
	// Tenant is the tenant requests are routed in (default "default").
	Tenant string
	// Meter records the latency histograms and error counts (nil: none).
	Meter metric.Meter
	// Logger logs failures; nil discards.
	Logger *slog.Logger
	// Transport overrides the upstream transport (tests); it must honour
	// the request context.
	Transport http.RoundTripper
	// Disagg configures the requests the router splits into a prefill
	// and a decode leg (disagg.go).
	Disagg DisaggOptions
}

// Proxy is the OpenAI-compatible front end (an http.Handler).
type Proxy struct {
	path    *requestpath.Path
	opts    Options
	client  *http.Client
	metrics *metrics
	handler http.Handler
}

// New returns the proxy over a request path.
func New(path *requestpath.Path, opts Options) (*Proxy, error) {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 2 * time.Second
	}
	if opts.HeaderTimeout <= 0 {
		opts.HeaderTimeout = 5 * time.Minute
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 5 * time.Minute
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.MaxConnsPerEngine <= 0 {
		opts.MaxConnsPerEngine = 1024
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.Tenant == "" {
		opts.Tenant = api.DefaultTenant
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Meter == nil {
		opts.Meter = noop.NewMeterProvider().Meter("")
	}
	if err := opts.Disagg.check(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Meter)
	if err != nil {
		return nil, err
	}
	tr := opts.Transport
	if tr == nil {
		tr = &http.Transport{
			DialContext:           (&net.Dialer{Timeout: opts.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ResponseHeaderTimeout: opts.HeaderTimeout,
			MaxIdleConnsPerHost:   256,
			MaxConnsPerHost:       opts.MaxConnsPerEngine,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true, // bytes pass through as the engine sent them
		}
	}
	p := &Proxy{path: path, opts: opts, client: &http.Client{Transport: tr}, metrics: m}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", p.completions)
	mux.HandleFunc("POST /v1/chat/completions", p.completions)
	mux.HandleFunc("GET /v1/models", p.models)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s (POST /v1/completions, POST /v1/chat/completions, GET /v1/models)", r.Method, r.URL.Path))
	})
	p.handler = otelhttp.NewHandler(p.authorized(mux), "kvrouter.proxy",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()), otelhttp.WithPropagators(propagator))
	return p, nil
}

// propagator reads and writes W3C trace context (traceparent, tracestate)
// whatever the process-wide propagator is: a request continues its
// caller's trace, and the engine's request continues the proxy's span.
var propagator = propagation.TraceContext{}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// authorized requires the bearer token when one is configured.
func (p *Proxy) authorized(next http.Handler) http.Handler {
	if p.opts.APIToken == "" {
		return next
	}
	want := []byte("Bearer " + p.opts.APIToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		if got == "" {
			p.metrics.refused(r.Context(), api.ReasonMissingToken)
			writeError(w, http.StatusUnauthorized, api.ReasonMissingToken, "this proxy requires Authorization: Bearer TOKEN")
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			p.metrics.refused(r.Context(), api.ReasonInvalidToken)
			writeError(w, http.StatusUnauthorized, api.ReasonInvalidToken, "invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// models answers GET /v1/models from the registered models.
func (p *Proxy) models(w http.ResponseWriter, r *http.Request) {
	data := []map[string]any{}
	for _, m := range p.path.Models(r.Context()) {
		data = append(data, map[string]any{"id": m, "object": "model", "owned_by": "kvrouter"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

// request is what the proxy reads of an OpenAI body; the body itself is
// forwarded untouched.
type request struct {
	Model  string          `json:"model"`
	Prompt json.RawMessage `json:"prompt"`
}

// RequestIDHeader names the request id: honoured when the client sends
// one, created otherwise; forwarded to the engine and answered.
const RequestIDHeader = "X-Request-Id"

// FairnessID is the request's fairness id: the Gateway API Inference
// Extension's x-gateway-inference-fairness-id or llm-d's
// x-llm-d-inference-fairness-id ("" when neither is sent). The rate
// limits count a request under it (else under its tenant). It is the
// gateway's to set from the identity it authenticated: a client that
// reaches the proxy directly can name any id.
func FairnessID(h http.Header) string {
	if v := h.Get("X-Gateway-Inference-Fairness-Id"); v != "" {
		return v
	}
	return h.Get("X-Llm-D-Inference-Fairness-Id")
}

// Objective is the request's inference objective: the Gateway API
// Inference Extension's x-gateway-inference-objective or llm-d's
// x-llm-d-inference-objective ("" when neither is sent). Flow control
// gives it its priority band.
func Objective(h http.Header) string {
	if v := h.Get("X-Gateway-Inference-Objective"); v != "" {
		return v
	}
	return h.Get("X-Llm-D-Inference-Objective")
}

// WorkerHeader names the answer's serving worker: "WORKER:DP_RANK".
const WorkerHeader = "X-Kvrouter-Worker"

// completions serves POST /v1/completions and /v1/chat/completions.
func (p *Proxy) completions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, err := readBody(w, r, p.opts.MaxBodyBytes)
	if err != nil {
		p.metrics.refused(ctx, api.ReasonBodyTooLarge)
		writeError(w, http.StatusRequestEntityTooLarge, api.ReasonBodyTooLarge, err.Error())
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		p.metrics.refused(ctx, api.ReasonBadJSON)
		writeError(w, http.StatusBadRequest, api.ReasonBadJSON, "the body is not a JSON object: "+err.Error())
		return
	}
	body = p.stripTransferFields(ctx, body) // a client never names where an engine pulls KV from
	if req.Model == "" {
		p.metrics.refused(ctx, api.ReasonMissingField)
		writeError(w, http.StatusBadRequest, api.ReasonMissingField, "model is required")
		return
	}
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	rr := requestpath.Request{ID: r.Header.Get(RequestIDHeader), Model: req.Model, Tenant: p.opts.Tenant, RateKey: FairnessID(r.Header),
		Objective: Objective(r.Header), Bytes: int64(len(body))}
	if rr.ID == "" {
		rr.ID = newRequestID()
	}
	if reason, msg := p.prompt(ctx, chat, req, body, &rr); reason != "" {
		p.metrics.refused(ctx, reason)
		writeError(w, http.StatusBadRequest, reason, msg)
		return
	}
	b, err := p.path.Route(ctx, rr)
	if err != nil {
		status, reason := routeStatus(err)
		p.metrics.refused(ctx, reason)
		w.Header().Set(RequestIDHeader, rr.ID)
		if ra := requestpath.RetryAfterer(nil); errors.As(err, &ra) {
			w.Header().Set("Retry-After", strconv.Itoa(requestpath.RetryAfterSeconds(ra.RetryAfter())))
		}
		writeError(w, status, reason, err.Error())
		return
	}
	defer b.Done(ctx)
	if b.Prefill != nil {
		p.split(w, r, b, body)
		return
	}
	p.forward(w, r, b, body)
}

// prompt fills the request's token ids (or why there are none); a reason
// is returned for a prompt the proxy refuses.
func (p *Proxy) prompt(ctx context.Context, chat bool, req request, body []byte, rr *requestpath.Request) (reason, msg string) {
	var res prompttokens.Result
	switch {
	case chat:
		c, err := prompttokens.ParseChat(body)
		if err != nil {
			return api.ReasonInvalidValue, err.Error()
		}
		res = prompttokens.Result{Source: prompttokens.FromNone, Reason: NoTokenIDs}
		if p.opts.Prompts != nil {
			res = p.opts.Prompts.Chat(ctx, req.Model, c)
		}
	default:
		c, err := prompttokens.ParseCompletionPrompt(req.Prompt)
		if err != nil {
			return api.ReasonInvalidValue, err.Error()
		}
		switch {
		case p.opts.Prompts != nil:
			res = p.opts.Prompts.Completion(ctx, req.Model, c)
		case c.IsText:
			res = prompttokens.Result{Source: prompttokens.FromNone, Reason: NoTokenIDs}
		default:
			res = prompttokens.Result{IDs: c.IDs, Source: prompttokens.FromRequest}
		}
	}
	if res.Source == prompttokens.FromNone || res.IDs == nil {
		rr.NoTokensReason = res.Reason
		if rr.NoTokensReason == "" {
			rr.NoTokensReason = NoTokenIDs
		}
		rr.EstimatedTokens = len(body) / bytesPerToken
		return "", ""
	}
	rr.Tokens = res.IDs
	return "", ""
}

// NoTokenIDs is the routed-by-load reason of a prompt no resolver turned
// into ids (no tokenizer configured).
const NoTokenIDs = "no_token_ids"

// bytesPerToken sizes the load of a prompt routed without ids (a common
// estimate for English text).
const bytesPerToken = 4

// routeStatus maps a request path error to the client's status and reason.
func routeStatus(err error) (int, string) {
	var ae *api.Error
	switch {
	case errors.Is(err, requestpath.ErrRateLimited):
		return http.StatusTooManyRequests, "rate_limited"
	case errors.Is(err, requestpath.ErrBreakersOpen):
		return http.StatusServiceUnavailable, "breakers_open"
	case errors.Is(err, requestpath.ErrOverloaded):
		return http.StatusTooManyRequests, "overloaded"
	case errors.Is(err, requestpath.ErrNoEndpoint):
		return http.StatusServiceUnavailable, "no_serving_endpoint"
	case errors.As(err, &ae) && errors.Is(err, api.ErrNotFound):
		return http.StatusNotFound, ae.Reason
	case errors.Is(err, api.ErrInvalid):
		return http.StatusBadRequest, api.ReasonInvalidValue
	case errors.Is(err, api.ErrConflict):
		return http.StatusConflict, api.ReasonConflict
	case errors.Is(err, api.ErrUnavailable):
		return http.StatusServiceUnavailable, api.ReasonUnavailable
	}
	return http.StatusInternalServerError, api.ReasonInternal
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		return nil, fmt.Errorf("reading the body (at most %d bytes): %w", limit, err)
	}
	return buf.Bytes(), nil
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "kvr-" + hex.EncodeToString(b[:])
}

// writeError answers in OpenAI's error shape, with kvrouter's reason as
// the code.
func writeError(w http.ResponseWriter, status int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": errorType(status), "code": reason}})
}

func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status < 500:
		return "invalid_request_error"
	}
	return "server_error"
}

// NewServer is the proxy's HTTP server on addr: header reads are bounded,
// whole requests and answers are not (an answer streams as long as the
// engine generates; Options.IdleTimeout bounds a silent one).
func NewServer(addr string, h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 1 << 20, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
}
