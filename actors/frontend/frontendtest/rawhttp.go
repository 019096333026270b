package frontendtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

// RawConn is an HTTP/1.1 connection a test writes by hand, to send a
// request's head without its body.
type RawConn struct {
	net.Conn
	r *bufio.Reader
}

// DialRaw opens a RawConn to addr (host:port); the test's cleanup closes
// it.
func DialRaw(tb testing.TB, addr string) *RawConn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return &RawConn{Conn: c, r: bufio.NewReader(c)}
}

// Head sends a request's head only — method, path, a JSON Content-Type
// and Content-Length length — and none of its body.
func (c *RawConn) Head(tb testing.TB, method, path string, length int) {
	tb.Helper()
	c.Send(tb, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: kvrouter\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, length))
}

// Send writes s as it is.
func (c *RawConn) Send(tb testing.TB, s string) {
	tb.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		tb.Fatalf("write: %v", err)
	}
}

// Answer reads the next response on the connection, failing the test if
// none arrives within eventually.Deadline; its body is read and closed
// (the text is returned).
func (c *RawConn) Answer(tb testing.TB) (*http.Response, string) {
	tb.Helper()
	_ = c.SetReadDeadline(time.Now().Add(eventually.Deadline))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		tb.Fatalf("no answer on the connection: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the answer's body: %v", err)
	}
	return resp, string(body)
}
