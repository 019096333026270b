package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tracectx"
)

// Options configures the handler (New) and the server around it (NewServer).
// Zero values take the defaults documented per field.
type Options struct {
	// APIToken, when set, is required as `Authorization: Bearer <token>` on
	// the mutating endpoints: /register, /unregister, /route,
	// /route/{request_id}/{prefill_done,free} and DELETE
	// /sessions/{session_id}.
	APIToken string
	// ProtectReads extends APIToken to the read endpoints (/workers,
	// /query, /query_by_hash, /dump, GET /sessions/{session_id},
	// /metrics, /loads, /decisions and the fleet page /ui). /healthz and
	// /readyz stay open for probes.
	ProtectReads bool

	// MaxTokens caps token_ids per request (default
	// DefaultMaxPromptTokens); more → 413 too_many_tokens.
	MaxTokens int
	// MaxBlockHashes caps block_hashes per request (default
	// DefaultMaxBlockHashes); more → 413 too_many_block_hashes.
	MaxBlockHashes int
	// MaxBodyBytes caps request bodies; larger → 413 body_too_large. The
	// default (0) is derived from the list caps: BodyBytesFor(MaxTokens,
	// MaxBlockHashes), so a body the token cap admits is never refused for
	// its size.
	MaxBodyBytes int64

	// MetricsHandler, when set, serves GET /metrics instead of the default,
	// which writes Handler.WriteMetrics (a caller extending the metrics
	// calls WriteMetrics from its own handler).
	MetricsHandler http.Handler
	// Admission, when set, bounds the POST /route requests the router
	// works on at once (shared with the other front ends of the process):
	// one over its cap is answered 503 overloaded with Retry-After as soon
	// as its body is decoded, before the router works on it (package
	// admission says why 503, and why after the body). Nil: no bound.
	Admission *admission.Gate
	// Edge, when set, admits the endpoints the table marks edged (POST
	// /route, /select_and_reserve) before their bodies are read, from
	// what is in flight and the declared Content-Length (package
	// admission, edge.go): a refusal is 503 overloaded with Retry-After
	// (413 body_too_large for a Content-Length over MaxBodyBytes). Nil:
	// no edge.
	Edge *admission.Edge
	// RankWarnings, when set, gives more warnings for a rank (the
	// tokenizer parity guard's), appended to its own in GET /workers.
	RankWarnings func(api.RankInfo) []string
	// RankBreaker, when set, gives the circuit breaker of a rank's
	// serving endpoint (the request path's), shown in GET /workers.
	RankBreaker func(api.RankInfo) *api.BreakerInfo
	// RankHealth, when set, gives the active health check of a rank's
	// serving endpoint (the request path's), shown in GET /workers.
	RankHealth func(api.RankInfo) *api.HealthInfo
	// NewRequestID makes the request id of a /route request that names
	// none (default: 26 random base32 characters from crypto/rand).
	NewRequestID func() string
	// Logger receives internal errors (with the details the client does
	// not see) and recovered panics (default slog.Default()).
	Logger *slog.Logger

	// DumpTimeout is the write deadline of one GET /dump, replacing the
	// server's WriteTimeout for that response (default 10 minutes).
	DumpTimeout time.Duration
	// Server timeouts for NewServer (defaults 5 s, 30 s, 30 s, 2 min) and
	// its header size cap (default 64 KiB).
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// Defaults of Options. Prompts of a million tokens and more are routine
// (current models take 1 M tokens of context), so that is the default cap.
const (
	DefaultMaxPromptTokens = 1 << 20
	DefaultMaxBlockHashes  = 1 << 18 // a 1 M-token prompt at block size 4
)

// Bytes of JSON one list element may take at most: a token id up to
// 4294967295 (10 digits) or a block hash up to 2^64−1 (20 digits), its
// comma and a space; bodyOverhead covers the other fields.
const (
	tokenJSONBytes = 12
	hashJSONBytes  = 22
	bodyOverhead   = 64 << 10
)

// BodyBytesFor is the body cap that admits every request within the token
// and hash caps, however its numbers are spelled: 1,048,576 tokens → 12 MiB
// + 64 KiB (a real prompt of that length is ≈ 7 MB).
func BodyBytesFor(maxTokens, maxHashes int) int64 {
	return int64(max(maxTokens*tokenJSONBytes, maxHashes*hashJSONBytes)) + bodyOverhead
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxPromptTokens
	}
	if o.MaxBlockHashes <= 0 {
		o.MaxBlockHashes = DefaultMaxBlockHashes
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = BodyBytesFor(o.MaxTokens, o.MaxBlockHashes)
	}
	if o.NewRequestID == nil {
		o.NewRequestID = rand.Text
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	def(&o.DumpTimeout, 10*time.Minute)
	def(&o.ReadHeaderTimeout, 5*time.Second)
	def(&o.ReadTimeout, 30*time.Second)
	def(&o.WriteTimeout, 30*time.Second)
	def(&o.IdleTimeout, 2*time.Minute)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	return o
}

// NewServer returns an http.Server for h on addr with the timeouts and the
// header cap of opts, logging through opts.Logger. The caller runs
// ListenAndServe and Shutdown.
func NewServer(addr string, h http.Handler, opts Options) *http.Server {
	o := opts.withDefaults()
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
}

// Handler serves kvrouter's HTTP API over a Backend. It is safe for
// concurrent use.
type Handler struct {
	backend  api.Backend
	opts     Options
	limits   limits
	mux      *http.ServeMux
	traced   http.Handler      // mux inside the HTTP server span (traced)
	tokenSum [sha256.Size]byte // of Options.APIToken
	metrics  metrics
}

// access says who may call an endpoint.
type access uint8

const (
	open     access = iota // never needs the token (probes)
	reads                  // needs it when Options.ProtectReads
	mutating               // needs it whenever Options.APIToken is set
)

// endpoint is one route of the API.
type endpoint struct {
	method   string
	path     string
	access   access
	notFound string // reason of a api.Backend api.ErrNotFound
	serve    func(h *Handler, w *responseWriter, r *http.Request) error
}

var endpoints = []endpoint{
	{"POST", "/register", mutating, api.ReasonNotFound, (*Handler).register},
	{"POST", "/unregister", mutating, api.ReasonUnknownWorker, (*Handler).unregister},
	{"GET", "/workers", reads, api.ReasonNotFound, (*Handler).workers},
	{"POST", "/query", reads, api.ReasonUnknownNamespace, (*Handler).query},
	{"POST", "/query_by_hash", reads, api.ReasonUnknownNamespace, (*Handler).queryByHash},
	{"GET", "/dump", reads, api.ReasonNotFound, (*Handler).dump},
	{"POST", "/route", mutating, api.ReasonUnknownNamespace, edged((*Handler).route)},
	{"POST", "/route/{request_id}/prefill_done", mutating, api.ReasonUnknownRequest, (*Handler).prefillDone},
	{"POST", "/route/{request_id}/free", mutating, api.ReasonUnknownRequest, (*Handler).free},
	{"GET", "/sessions/{session_id}", reads, api.ReasonUnknownSession, (*Handler).session},
	{"DELETE", "/sessions/{session_id}", mutating, api.ReasonUnknownSession, (*Handler).forgetSession},
	{"POST", "/register_peer", mutating, api.ReasonNotFound, (*Handler).registerPeer},
	{"POST", "/deregister_peer", mutating, api.ReasonUnknownPeer, (*Handler).deregisterPeer},
	{"GET", "/peers", reads, api.ReasonNotFound, (*Handler).peers},
	{"GET", "/health", open, api.ReasonNotFound, (*Handler).health},
	{"GET", "/healthz", open, api.ReasonNotFound, (*Handler).healthz},
	{"GET", "/readyz", open, api.ReasonNotFound, (*Handler).readyz},
	{"GET", "/metrics", reads, api.ReasonNotFound, (*Handler).serveMetrics},
	// Dynamo's standalone selection service (selection.go).
	{"POST", "/select", reads, api.ReasonUnknownNamespace, (*Handler).selectWorker},
	{"POST", "/select_and_reserve", mutating, api.ReasonUnknownNamespace, edged((*Handler).selectAndReserve)},
	{"POST", "/reservations", mutating, api.ReasonUnknownNamespace, (*Handler).reserve},
	{"POST", "/reservations/{request_id}/prefill_complete", mutating, api.ReasonUnknownRequest, (*Handler).prefillComplete},
	{"POST", "/reservations/{request_id}/output_block", mutating, api.ReasonUnknownRequest, (*Handler).outputBlock},
	{"DELETE", "/reservations/{request_id}", mutating, api.ReasonUnknownRequest, (*Handler).freeReservation},
	{"GET", "/loads", reads, api.ReasonNotFound, (*Handler).loads},
	{"POST", "/potential_loads", reads, api.ReasonUnknownNamespace, (*Handler).potentialLoads},
	{"POST", "/overlap_scores", reads, api.ReasonUnknownNamespace, (*Handler).overlapScores},
	// The fleet page and its decision log (fleet.go); the page reads
	// /workers, /loads and /decisions.
	{"GET", "/decisions", reads, api.ReasonNotFound, (*Handler).decisions},
	{"GET", "/ui", reads, api.ReasonNotFound, (*Handler).ui},
}

// overloaded is the answer to a request over Options.Admission's cap.
func overloaded(g *admission.Gate) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, reason: api.ReasonOverloaded,
		msg: "overloaded: " + strconv.Itoa(g.Max()) + " route requests in flight; retry later"}
}

// New returns the API handler over backend. Every endpoint answers JSON
// (except /metrics); every error is {"error": "...", "reason": "..."}.
func New(backend api.Backend, opts Options) *Handler {
	h := &Handler{
		backend: backend,
		opts:    opts.withDefaults(),
		mux:     http.NewServeMux(),
	}
	h.limits = limits{maxTokens: h.opts.MaxTokens, maxHashes: h.opts.MaxBlockHashes}
	h.tokenSum = sha256.Sum256([]byte(h.opts.APIToken))
	allowed := map[string][]string{} // path → its methods, in endpoints order
	var paths []string
	for _, ep := range endpoints {
		h.mux.Handle(ep.method+" "+ep.path, h.wrap(ep.path, func(w *responseWriter, r *http.Request) error {
			if err := h.authorize(w, r, ep.access); err != nil {
				return err
			}
			return h.mapError(r, ep.serve(h, w, r), ep.notFound)
		}))
		if allowed[ep.path] == nil {
			paths = append(paths, ep.path)
		}
		allowed[ep.path] = append(allowed[ep.path], ep.method)
		if ep.method == "GET" {
			allowed[ep.path] = append(allowed[ep.path], "HEAD")
		}
	}
	// Each path without a method: any other method lands here.
	for _, path := range paths {
		allow := strings.Join(allowed[path], ", ")
		h.mux.Handle(path, h.wrap(path, func(w *responseWriter, r *http.Request) error {
			w.Header().Set("Allow", allow)
			return &apiError{status: http.StatusMethodNotAllowed, reason: api.ReasonMethodNotAllowed,
				msg: r.Method + " is not allowed on " + path + " (allowed: " + allow + ")"}
		}))
	}
	h.mux.Handle("/", h.wrap("other", func(w *responseWriter, r *http.Request) error {
		return &apiError{status: http.StatusNotFound, reason: api.ReasonNotFound, msg: "no such endpoint: " + clip(r.URL.Path)}
	}))
	h.traced = traced(h.mux)
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if tracectx.Enabled() { // otelhttp would cost ~35 allocations per request for spans nobody records
		h.traced.ServeHTTP(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// wrap instruments one route (label: its path pattern, a bounded set) and
// turns a returned error or a panic into an error response.
func (h *Handler) wrap(label string, serve func(*responseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &responseWriter{ResponseWriter: rw, head: r.Method == http.MethodHead}
		h.metrics.inFlight.Add(1)
		defer func() {
			h.metrics.inFlight.Add(-1)
			p := recover()
			switch {
			case p == nil:
			case p == http.ErrAbortHandler: // deliberate: cut the connection
				h.metrics.count(label, w.code())
				panic(p)
			default:
				h.metrics.panics.Add(1)
				h.opts.Logger.Error("httpapi: panic in handler", "path", label, "panic", p, "stack", string(debug.Stack()))
				if w.wrote {
					// Part of the answer is out: cut it rather than let it
					// pass for complete.
					h.metrics.count(label, w.code())
					panic(http.ErrAbortHandler)
				}
				h.writeError(w, internalError())
			}
			h.metrics.count(label, w.code())
		}()
		if err := serve(w, r); err != nil {
			if errors.Is(err, errAbort) {
				panic(http.ErrAbortHandler)
			}
			h.writeError(w, err)
		}
	})
}

// errAbort asks wrap to cut the connection (a stream failed after its
// first bytes were sent).
var errAbort = errors.New("abort response")

func internalError() *apiError {
	return &apiError{status: http.StatusInternalServerError, reason: api.ReasonInternal, msg: "internal error"}
}

// authorize checks the bearer token for endpoints that need one. The
// comparison hashes both sides first, so it takes the same time whatever the
// token's length and content.
func (h *Handler) authorize(w *responseWriter, r *http.Request, a access) error {
	if h.opts.APIToken == "" || a == open || (a == reads && !h.opts.ProtectReads) {
		return nil
	}
	const realm = `Bearer realm="kvrouter"`
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if auth == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		w.Header().Set("WWW-Authenticate", realm)
		return &apiError{status: http.StatusUnauthorized, reason: api.ReasonMissingToken,
			msg: "this endpoint needs Authorization: Bearer <token>"}
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if subtle.ConstantTimeCompare(sum[:], h.tokenSum[:]) != 1 {
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token"`)
		return &apiError{status: http.StatusUnauthorized, reason: api.ReasonInvalidToken, msg: "invalid bearer token"}
	}
	return nil
}

// mapError turns a Backend error into an apiError (see Backend for the
// rules); notFound is the endpoint's reason for ErrNotFound. Errors outside
// the client-facing classes are logged here with their text and answered
// "internal error".
func (h *Handler) mapError(r *http.Request, err error, notFound string) error {
	if err == nil || errors.Is(err, errAbort) {
		return err
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var status int
	var reason string
	switch {
	case errors.Is(err, api.ErrInvalid):
		status, reason = http.StatusBadRequest, api.ReasonInvalidValue
	case errors.Is(err, api.ErrNotFound):
		status, reason = http.StatusNotFound, notFound
	case errors.Is(err, api.ErrConflict):
		status, reason = http.StatusConflict, api.ReasonConflict
	case errors.Is(err, api.ErrUnavailable):
		status, reason = http.StatusServiceUnavailable, api.ReasonUnavailable
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return &apiError{status: statusClientClosed, reason: api.ReasonCanceled, msg: "request canceled"}
	case errors.Is(err, context.DeadlineExceeded):
		h.opts.Logger.Warn("httpapi: backend timed out", "path", r.URL.Path, "err", err)
		return &apiError{status: http.StatusServiceUnavailable, reason: api.ReasonTimeout, msg: "timed out; retry later"}
	default:
		h.opts.Logger.Error("httpapi: backend error", "method", r.Method, "path", r.URL.Path, "err", err)
		return internalError()
	}
	var be *api.Error
	if errors.As(err, &be) && be.Reason != "" {
		reason = be.Reason
	}
	return &apiError{status: status, reason: reason, msg: err.Error()}
}

// writeError writes err (an *apiError after mapError; anything else is a
// bug and answered 500) unless a response is already under way.
func (h *Handler) writeError(w *responseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		h.opts.Logger.Error("httpapi: unmapped error", "err", err)
		ae = internalError()
	}
	if w.wrote {
		return
	}
	if ae.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	h.writeJSON(w, ae.status, errorBody{Error: ae.msg, Reason: ae.reason})
}

type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// bufPool recycles request and response buffers.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putBuffer returns buf to bufPool unless it grew past what a typical
// request needs (a rare huge one should not pin its memory).
func putBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= 1<<20+4096 {
		bufPool.Put(buf)
	}
}

// writeJSON encodes v in full before sending anything, so an encoding
// failure (a NaN from the Backend) is still a clean 500.
func (h *Handler) writeJSON(w *responseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuffer(buf)
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		h.opts.Logger.Error("httpapi: encoding response", "err", err)
		buf.Reset()
		status = http.StatusInternalServerError
		_ = json.NewEncoder(buf).Encode(errorBody{Error: "internal error", Reason: api.ReasonInternal})
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if !w.head {
		_, _ = w.Write(buf.Bytes())
	}
}

// responseWriter records the status for metrics and whether anything was
// sent. Unwrap lets http.ResponseController reach the connection.
type responseWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	head   bool // a HEAD request: headers only
}

func (w *responseWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *responseWriter) Flush() {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying writer (for http.ResponseController).
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *responseWriter) code() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.status
}
