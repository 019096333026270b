package admission

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of EdgeConfig (kvrouter serve's --edge-* flags; package doc).
const (
	// DefaultEdgeInFlightPerCore: requests in flight per core. One core
	// answers a /route in ~85 µs of CPU (bench/README.md, "Judged"), so in
	// the route path's 50 ms deadline it finishes ~600; 512 in flight is
	// what it can answer in time, and no more is worth taking.
	DefaultEdgeInFlightPerCore = 512
	// DefaultEdgeBytesInFlight: declared bodies in flight, 256 MiB: the
	// memory a burst of bodies may hold before the edge refuses more (20
	// of the largest /route bodies, ~120,000 typical ones).
	DefaultEdgeBytesInFlight = 256 << 20
)

// DefaultEdgeInFlight is DefaultEdgeInFlightPerCore × GOMAXPROCS.
func DefaultEdgeInFlight() int { return DefaultEdgeInFlightPerCore * runtime.GOMAXPROCS(0) }

// EdgeConfig configures an Edge.
type EdgeConfig struct {
	EdgeLimits
	// Overloaded, when set, is the route path's overload state, read for
	// each request (Gate.Full).
	Overloaded func() bool
	// Logger gets a line of refusals at most every 10 s (nil: silent).
	Logger *slog.Logger
}

// Edge is the concurrent shell around an EdgeState: it holds the lock,
// counts, traces and logs. A nil Edge admits everything.
type Edge struct {
	cfg     EdgeConfig
	mu      sync.Mutex
	st      *EdgeState
	refused [][reasonCount]uint64 // by endpoint, reason; under mu
	total   atomic.Uint64
	logged  atomic.Uint64
	lastLog atomic.Int64
}

// NewEdge returns an Edge under cfg.
func NewEdge(cfg EdgeConfig) *Edge {
	return &Edge{cfg: cfg, st: NewEdgeState(cfg.EdgeLimits)}
}

// Enter asks for a request at endpoint (its body cap bodyCap) whose
// headers are in: ok true with a Ticket the caller must Leave on every
// path, or the refusal's reason, counted, traced on the request's span
// and logged at a bounded rate.
func (e *Edge) Enter(ctx context.Context, endpoint string, bodyCap, contentLength int64) (Ticket, Reason) {
	if e == nil {
		return Ticket{}, ReasonNone
	}
	over := e.cfg.Overloaded != nil && e.cfg.Overloaded()
	e.mu.Lock()
	i := e.st.Endpoint(endpoint, bodyCap)
	t, reason := e.st.Admit(Ask{Endpoint: i, ContentLength: contentLength, Overloaded: over})
	if reason != ReasonNone {
		for len(e.refused) <= i {
			e.refused = append(e.refused, [reasonCount]uint64{})
		}
		e.refused[i][reason]++
	}
	e.mu.Unlock()
	if reason != ReasonNone {
		e.refuse(ctx, endpoint, reason)
	}
	return t, reason
}

// Leave gives an admitted request's share back.
func (e *Edge) Leave(t Ticket) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.st.Done(t)
	e.mu.Unlock()
}

func (e *Edge) refuse(ctx context.Context, endpoint string, reason Reason) {
	total := e.total.Add(1)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("edge admission refused", trace.WithAttributes(
			attribute.String("kvrouter.edge.reason", reason.String()), attribute.String("kvrouter.edge.endpoint", endpoint)))
	}
	if e.cfg.Logger == nil {
		return
	}
	now, last := time.Now().UnixNano(), e.lastLog.Load()
	if !logDue(last, now) || !e.lastLog.CompareAndSwap(last, now) {
		return
	}
	e.cfg.Logger.Warn("edge admission: refusing requests before their bodies", "endpoint", endpoint, "reason", reason.String(),
		"refused", total-e.logged.Swap(total), "max_in_flight", e.cfg.MaxInFlight, "max_bytes_in_flight", e.cfg.MaxBytesInFlight)
}

// Refused is the requests refused at endpoint for reason so far.
func (e *Edge) Refused(endpoint string, reason Reason) uint64 {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.refused {
		if e.st.Name(i) == endpoint {
			return e.refused[i][reason]
		}
	}
	return 0
}

// InFlight is the requests admitted and not left, and their bytes.
func (e *Edge) InFlight() (int, int64) {
	if e == nil {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st.InFlight()
}

// RetryAfter is the Retry-After of a refusal, in seconds.
const RetryAfter = "1"

// Handler admits each request to next at the edge as endpoint (body cap
// bodyCap), before next reads its body; a refused one is answered by
// refuse (with Retry-After already set, and sent without waiting for the
// body: AnswerUnread). The slot is freed when next
// returns, however it returns (a panic included).
func (e *Edge) Handler(endpoint string, bodyCap int64, next http.Handler, refuse func(http.ResponseWriter, *http.Request, Reason)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, reason := e.Enter(r.Context(), endpoint, bodyCap, r.ContentLength)
		if reason != ReasonNone {
			if reason == ReasonBodyTooLarge { // net/http closes the connection on a large unread body
				refuse(w, r, reason)
				return
			}
			w.Header().Set("Retry-After", RetryAfter)
			AnswerUnread(w, r, func() {
				a := &sizedAnswer{ResponseWriter: w, status: http.StatusOK}
				refuse(a, r, reason)
				a.send()
			})
			return
		}
		defer e.Leave(t)
		next.ServeHTTP(w, r)
	})
}

// AnswerUnread sends the refusal write writes before the request's body
// has arrived; write must give it a Content-Length (a chunked answer ends
// only when the handler returns, after the body). Left alone, a net/http
// server answering a request whose body its handler never read first
// reads and discards up to 256 KiB of that body, so that the connection
// can carry the next request: the refusal would wait for a slow sender's
// body, up to the server's read timeout. In full duplex
// (http.ResponseController.EnableFullDuplex) the answer is flushed at once
// and the body discarded after it, here, by closing it (more than 256 KiB
// left unread closes the connection instead). The close is the handler's
// own: leaving it to net/http after a full-duplex handler returns starts a
// background read the server does not stop, and the connection's next
// request panics (an open net/http bug: "invalid concurrent Body.Read
// call"). A writer with no full-duplex mode (HTTP/2, whose streams need no
// such read) just gets the answer.
func AnswerUnread(w http.ResponseWriter, r *http.Request, write func()) {
	rc := http.NewResponseController(w)
	duplex := rc.EnableFullDuplex() == nil
	write()
	if duplex {
		_ = rc.Flush()
		_ = r.Body.Close()
	}
}

// sizedAnswer holds a refusal's body so that it goes out with a
// Content-Length (AnswerUnread).
type sizedAnswer struct {
	http.ResponseWriter
	status int
	body   []byte
}

// WriteHeader records the status send writes.
func (a *sizedAnswer) WriteHeader(status int) { a.status = status }

// Write holds b for send.
func (a *sizedAnswer) Write(b []byte) (int, error) {
	a.body = append(a.body, b...)
	return len(b), nil
}

// send writes the held answer, its Content-Length set.
func (a *sizedAnswer) send() {
	a.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	a.ResponseWriter.WriteHeader(a.status)
	_, _ = a.ResponseWriter.Write(a.body)
}

// WriteMetrics writes the edge's figures in the Prometheus text format:
//
//	kvrouter_edge_refused_total{endpoint,reason}  requests refused before their bodies
//	kvrouter_edge_in_flight                       requests admitted, not yet done (gauge)
//	kvrouter_edge_bytes_in_flight                 their declared body bytes (gauge)
//	kvrouter_edge_max_in_flight, kvrouter_edge_max_bytes_in_flight  the caps (0: none)
func (e *Edge) WriteMetrics(w io.Writer) error {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	b := []byte("# HELP kvrouter_edge_refused_total Requests refused at the edge, before their bodies were read.\n# TYPE kvrouter_edge_refused_total counter\n")
	for i, byReason := range e.refused {
		for r := ReasonBodyTooLarge; r < reasonCount; r++ {
			b = fmt.Appendf(b, "kvrouter_edge_refused_total{endpoint=%s,reason=%q} %d\n", strconv.Quote(e.st.Name(i)), r.String(), byReason[r])
		}
	}
	n, bytes := e.st.InFlight()
	e.mu.Unlock()
	b = fmt.Appendf(b, `# HELP kvrouter_edge_in_flight Requests admitted at the edge and not yet answered.
# TYPE kvrouter_edge_in_flight gauge
kvrouter_edge_in_flight %d
# HELP kvrouter_edge_bytes_in_flight Declared body bytes of the requests admitted at the edge (a chunked body counts its endpoint's cap).
# TYPE kvrouter_edge_bytes_in_flight gauge
kvrouter_edge_bytes_in_flight %d
# HELP kvrouter_edge_max_in_flight Requests in flight the edge admits at most (0: no cap).
# TYPE kvrouter_edge_max_in_flight gauge
kvrouter_edge_max_in_flight %d
# HELP kvrouter_edge_max_bytes_in_flight Declared body bytes in flight the edge admits at most (0: no cap).
# TYPE kvrouter_edge_max_bytes_in_flight gauge
kvrouter_edge_max_bytes_in_flight %d
`, n, bytes, e.cfg.MaxInFlight, e.cfg.MaxBytesInFlight)
	_, err := w.Write(b)
	return err
}
