package zmtpguard

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// readBuffer is the read buffer of a guarded connection: one system call
// per readBuffer bytes at most.
const readBuffer = 16 << 10

// guarded maps the transports kvrouter's sockets use to the network that
// carries them; each is registered with zmq4 under "kvrouter+" + its name
// (zmq4 refuses a second "tcp" or "ipc").
var guarded = map[string]string{"tcp": "tcp", "ipc": "unix"}

func init() {
	for scheme, network := range guarded {
		if err := zmq4.RegisterTransport("kvrouter+"+scheme, guardedTransport{transport.New(network)}); err != nil {
			panic(err) // registered once, at init: cannot happen
		}
	}
}

// Endpoint returns the endpoint a kvrouter socket dials or binds for ep:
// tcp:// and ipc:// through the guarded transports, inproc:// (in-process,
// no peer outside it) unchanged. Any other transport (udp://, or none) is
// refused: its connections would not be guarded.
func Endpoint(ep string) (string, error) {
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok {
		return "", fmt.Errorf("endpoint %q has no transport (want tcp://host:port)", ep)
	}
	if _, ok := guarded[scheme]; ok {
		return "kvrouter+" + scheme + "://" + rest, nil
	}
	if scheme == "inproc" {
		return ep, nil
	}
	return "", fmt.Errorf("endpoint %q: transport %q is not supported (tcp, ipc or inproc)", ep, scheme)
}

type guardedTransport struct{ transport.Transport }

func (t guardedTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return newConn(c), nil
}

func (t guardedTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := t.Transport.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return listener{l}, nil
}

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newConn(c), nil
}

// conn is a connection whose reads go through a buffer and a guard. zmq4
// reads a connection from one goroutine at a time, so the guard needs no
// lock; writes pass through untouched.
type conn struct {
	net.Conn
	r *bufio.Reader
	g guard
}

func newConn(c net.Conn) *conn {
	return &conn{Conn: c, r: bufio.NewReaderSize(c, readBuffer), g: newGuard(MaxMessageSize)}
}

// Read hands zmq4 the next bytes, unless they complete a frame header that
// takes a message over MaxMessageSize: then it closes the connection and
// fails with ErrMessageTooLarge, before zmq4 sees the size (and allocates
// a body of it).
func (c *conn) Read(p []byte) (int, error) {
	if c.g.state == refused {
		return 0, ErrMessageTooLarge
	}
	n, err := c.r.Read(p)
	if c.g.scan(p[:n]) {
		return n, err
	}
	slog.Warn("zmtpguard: connection refused", "local", c.LocalAddr(), "remote", c.RemoteAddr(),
		"why", c.g.refusal())
	_ = c.Conn.Close()
	return 0, ErrMessageTooLarge
}
