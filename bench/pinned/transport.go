package pinned

// The generator's HTTP/1.1 client transport (leanTransport), and why it is
// not net/http's.
//
// A profile of the generator (--generator-cpuprofile) with net/http's
// Transport had ~90–100 µs of CPU per request on the load core: each
// keep-alive connection runs a read loop and a write loop goroutine, and
// every request crosses both (a select and a wake-up each way), its header
// and body are written by separate flushes, the response header is parsed
// into a map — at 10k req/s that alone is the core, before the engines.
// leanTransport does one request at a time per connection on the caller's
// goroutine (vegeta's worker): the whole request in one write, the answer
// read into a reused buffer, the connection back in the pool. The servers
// see ordinary keep-alive HTTP/1.1.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// leanTransport is an http.RoundTripper for plain HTTP/1.1 to one server
// whose answers carry a Content-Length (both servers under test set it):
// a pool of keep-alive connections, each used by one request at a time.
// An answer without a length, or any I/O error, drops the connection.
type leanTransport struct {
	mu    sync.Mutex
	idle  []*leanConn
	dial  net.Dialer
	limit int64 // the largest answer body read (longer: an error)
	// timeout bounds one request, written and answered (0: none but the
	// request context's deadline).
	timeout time.Duration
}

// leanConn is one pooled connection with its read and write buffers.
type leanConn struct {
	c   net.Conn
	r   *bufio.Reader
	out []byte // the request being written
}

// maxAnswer bounds an answer body the generator reads.
const maxAnswer = 1 << 20

// newLeanTransport returns a transport whose requests time out after
// timeout (0: only at their context's deadline).
func newLeanTransport(timeout time.Duration) *leanTransport {
	return &leanTransport{limit: maxAnswer, timeout: timeout}
}

// RoundTrip implements http.RoundTripper.
func (t *leanTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return nil, fmt.Errorf("lean transport: scheme %q", req.URL.Scheme)
	}
	if req.Body != nil {
		defer req.Body.Close()
		if req.ContentLength < 0 {
			return nil, errors.New("lean transport: a body of unknown length")
		}
	}
	lc, err := t.get(req.Context(), req.URL.Host)
	if err != nil {
		return nil, err
	}
	resp, keep, err := lc.exchange(req, t.limit, t.timeout)
	if err != nil || !keep {
		lc.c.Close()
		return resp, err
	}
	t.put(lc)
	return resp, nil
}

// CloseIdleConnections closes the pooled connections.
func (t *leanTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, lc := range idle {
		lc.c.Close()
	}
}

func (t *leanTransport) get(ctx context.Context, host string) (*leanConn, error) {
	t.mu.Lock()
	if n := len(t.idle); n > 0 {
		lc := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		return lc, nil
	}
	t.mu.Unlock()
	c, err := t.dial.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &leanConn{c: c, r: bufio.NewReaderSize(c, 16<<10)}, nil
}

func (t *leanTransport) put(lc *leanConn) {
	t.mu.Lock()
	t.idle = append(t.idle, lc)
	t.mu.Unlock()
}

// exchange writes req (its body of ContentLength bytes) in one write and
// reads the answer whole; keep says whether the connection can carry
// another request.
func (lc *leanConn) exchange(req *http.Request, limit int64, timeout time.Duration) (*http.Response, bool, error) {
	deadline, _ := req.Context().Deadline()
	if timeout > 0 {
		if d := time.Now().Add(timeout); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
	}
	if err := lc.c.SetDeadline(deadline); err != nil {
		return nil, false, err
	}
	b := append(lc.out[:0], req.Method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, req.URL.Host...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, max(req.ContentLength, 0), 10)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		for _, v := range vs {
			b = append(append(append(append(b, k...), ": "...), v...), "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	if n := int(req.ContentLength); n > 0 {
		b = slices.Grow(b, n)
		if _, err := io.ReadFull(req.Body, b[len(b):len(b)+n]); err != nil {
			return nil, false, err
		}
		b = b[:len(b)+n]
	}
	lc.out = b
	if _, err := lc.c.Write(b); err != nil {
		return nil, false, err
	}
	return readAnswer(lc.r, req, limit)
}

// readAnswer reads one HTTP/1.1 answer with a Content-Length.
func readAnswer(r *bufio.Reader, req *http.Request, limit int64) (*http.Response, bool, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return nil, false, fmt.Errorf("lean transport: bad status line %q", clipBytes(line))
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return nil, false, fmt.Errorf("lean transport: bad status line %q", clipBytes(line))
	}
	length, keep := int64(-1), line[7] == '1'
	for {
		h, err := readLine(r)
		if err != nil {
			return nil, false, err
		}
		if len(h) == 0 {
			break
		}
		k, v, _ := bytes.Cut(h, []byte(":"))
		v = bytes.TrimSpace(v)
		switch {
		case asciiEqualFold(k, "Content-Length"):
			if length, err = strconv.ParseInt(string(v), 10, 64); err != nil || length < 0 {
				return nil, false, fmt.Errorf("lean transport: bad Content-Length %q", clipBytes(v))
			}
		case asciiEqualFold(k, "Connection") && asciiEqualFold(v, "close"):
			keep = false
		case asciiEqualFold(k, "Transfer-Encoding"):
			return nil, false, errors.New("lean transport: an answer without Content-Length (Transfer-Encoding)")
		}
	}
	if length < 0 {
		return nil, false, errors.New("lean transport: an answer without Content-Length")
	}
	if length > limit {
		return nil, false, fmt.Errorf("lean transport: answer of %d bytes", length)
	}
	if req.Method == http.MethodHead {
		length = 0
	}
	// vegeta reads the body (MaxBody 0: none of it), so it is discarded
	// here and the connection goes back to the pool at once.
	if _, err := r.Discard(int(length)); err != nil {
		return nil, false, err
	}
	return &http.Response{StatusCode: code, Status: string(line[9:]), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, ContentLength: length, Request: req}, keep, nil
}

// readLine reads one CRLF-terminated line (without it).
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("lean transport: header line too long")
		}
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i]|0x20, s[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

func clipBytes(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
