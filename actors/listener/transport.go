package listener

import (
	"bufio"
	"context"
	"net"
	"strings"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// zmq4 reads each frame's header and body with separate calls on the
// connection: a 3-frame KV-event message cost 6 to 9 read system calls,
// about a fifth of the ingest path's CPU. kvrouter's sockets dial and bind
// tcp:// endpoints through zmq4's own TCP transport registered again under
// bufferedScheme, whose connections read through a buffer (one system call
// per readBuffer bytes at most). zmq4 refuses a second "tcp" transport,
// hence the scheme of its own (socketEndpoint).
const (
	bufferedScheme = "kvrouter+tcp"
	readBuffer     = 16 << 10
)

func init() {
	if err := zmq4.RegisterTransport(bufferedScheme, bufferedTransport{transport.New("tcp")}); err != nil {
		panic(err) // registered once, at init: cannot happen
	}
}

// socketEndpoint is the endpoint kvrouter's sockets use for ep: tcp://
// through the buffered transport, anything else unchanged.
func socketEndpoint(ep string) string {
	if rest, ok := strings.CutPrefix(ep, "tcp://"); ok {
		return bufferedScheme + "://" + rest
	}
	return ep
}

type bufferedTransport struct{ transport.Transport }

func (t bufferedTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.Transport.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return newBufferedConn(c), nil
}

func (t bufferedTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	l, err := t.Transport.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return bufferedListener{l}, nil
}

type bufferedListener struct{ net.Listener }

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newBufferedConn(c), nil
}

// bufferedConn is a connection whose reads go through a buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func newBufferedConn(c net.Conn) *bufferedConn {
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBuffer)}
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
