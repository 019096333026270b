package wirefix

import (
	"context"
	"net"
	"testing"

	"github.com/go-zeromq/zmq4"
)

// BoundPub is a ZeroMQ PUB listening on a free loopback port, as an
// engine binds its KV-event socket, closed when the test ends; endpoint is
// the tcp:// address to subscribe to.
func BoundPub(t testing.TB) (sock zmq4.Socket, endpoint string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint = "tcp://" + l.Addr().String()
	l.Close()
	sock = zmq4.NewPub(context.Background())
	if err := sock.Listen(endpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return sock, endpoint
}
