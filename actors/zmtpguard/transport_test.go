package zmtpguard

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/zmtpguard/zmtptest"
)

func TestEndpoint(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"tcp://127.0.0.1:5557", "kvrouter+tcp://127.0.0.1:5557", ""},
		{"tcp://*:5557", "kvrouter+tcp://*:5557", ""},
		{"ipc:///tmp/kv.sock", "kvrouter+ipc:///tmp/kv.sock", ""},
		{"inproc://cache", "inproc://cache", ""},
		{"udp://127.0.0.1:5557", "", `transport "udp" is not supported`},
		{"127.0.0.1:5557", "", "has no transport"},
	} {
		got, err := Endpoint(c.in)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Endpoint(%q) = %q, %v; want %q, error containing %q", c.in, got, err, c.want, c.err)
		}
	}
}

// hostileSub speaks ZMTP 3.0 as a SUB (greeting, READY) on c and then
// declares a message of a terabyte.
func hostileSub(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write(cat(greeting(), zmtptest.Ready("SUB"), long(0, 1<<40))); err != nil {
		t.Fatal(err)
	}
}

// A bound socket (here a PUB, as the router-event publisher binds) reads
// what its peers send (subscriptions); a peer declaring a terabyte gets
// its connection closed instead of the process killed.
func TestABoundSocketRefusesATerabyte(t *testing.T) {
	for _, ep := range []string{"tcp://127.0.0.1:0", "ipc://" + filepath.Join(t.TempDir(), "pub.sock")} {
		t.Run(strings.SplitN(ep, ":", 2)[0], func(t *testing.T) {
			guarded, err := Endpoint(ep)
			if err != nil {
				t.Fatal(err)
			}
			pub := zmq4.NewPub(context.Background())
			defer pub.Close()
			if err := pub.Listen(guarded); err != nil {
				t.Fatal(err)
			}
			addr := pub.Addr()
			c, err := net.Dial(addr.Network(), addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			hostileSub(t, c)
			// The guard closes the connection: the peer reads to EOF.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := io.Copy(io.Discard, c)
			if err != nil {
				t.Fatalf("connection not closed by the guard (read %d bytes, then %v)", n, err)
			}
		})
	}
}

// A guarded connection fails the read that would hand zmq4 the size,
// closes the connection, and keeps failing.
func TestConnRefusesBeforeTheSizeIsHandedOver(t *testing.T) {
	mine, peer := net.Pipe()
	c := newConn(mine)
	go func() { _, _ = peer.Write(cat(greeting(), ready, long(0, 1<<40))) }()
	read := func(n int) error { _, err := io.ReadFull(c, make([]byte, n)); return err }
	// As zmq4 reads: the greeting, READY's header and body, a header.
	for _, n := range []int{greetingLen, 2, len(ready) - 2, 2} {
		if err := read(n); err != nil {
			t.Fatalf("read of %d: %v", n, err)
		}
	}
	err := read(7) // the rest of the long size: over the cap
	var ne net.Error
	if !errors.Is(err, ErrMessageTooLarge) || !errors.As(err, &ne) || ne.Timeout() {
		t.Fatalf("read of the size: %v, want ErrMessageTooLarge (a net.Error, not a timeout)", err)
	}
	if err := read(1); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("read after the refusal: %v", err)
	}
	if _, err := peer.Write([]byte{0}); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("peer's write after the refusal: %v, want the connection closed", err)
	}
}
