package simengine

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Test helpers for real ZeroMQ sockets on loopback. Every socket is closed
// and its reader goroutine joined in t.Cleanup.

const recvTimeout = 5 * time.Second

// receiver reads messages from a socket on a goroutine.
type receiver struct {
	sock zmq4.Socket
	msgs chan zmq4.Msg
	stop chan struct{}
	done chan struct{}
}

func startReceiver(t *testing.T, sock zmq4.Socket) *receiver {
	t.Helper()
	r := &receiver{sock: sock, msgs: make(chan zmq4.Msg, 64), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			m, err := sock.Recv()
			select {
			case <-r.stop:
				return
			default:
			}
			if err != nil {
				continue // the peer went away; the next Recv blocks until Close
			}
			select {
			case r.msgs <- m:
			case <-r.stop:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(r.stop)
		sock.Close()
		<-r.done
	})
	return r
}

// next returns the next message or fails the test after recvTimeout.
func (r *receiver) next(t *testing.T) zmq4.Msg {
	t.Helper()
	select {
	case m := <-r.msgs:
		return m
	case <-time.After(recvTimeout):
		t.Fatal("no message within", recvTimeout)
		return zmq4.Msg{}
	}
}

// quiet fails the test if a message arrives within d.
func (r *receiver) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-r.msgs:
		t.Fatalf("unexpected message %v", m)
	case <-time.After(d):
	}
}

// subscribe dials a SUB to endpoint with a topic prefix.
func subscribe(t *testing.T, endpoint, prefix string) *receiver {
	t.Helper()
	sub := zmq4.NewSub(context.Background(), zmq4.WithDialerRetry(20*time.Millisecond))
	if err := sub.Dial(endpoint); err != nil {
		sub.Close()
		t.Fatalf("SUB dial %s: %v", endpoint, err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, prefix); err != nil {
		sub.Close()
		t.Fatalf("SUB subscribe: %v", err)
	}
	return startReceiver(t, sub)
}

// dealer dials a DEALER to a replay endpoint.
func dealer(t *testing.T, endpoint string) *receiver {
	t.Helper()
	d := zmq4.NewDealer(context.Background(), zmq4.WithDialerRetry(20*time.Millisecond))
	if err := d.Dial(endpoint); err != nil {
		d.Close()
		t.Fatalf("DEALER dial %s: %v", endpoint, err)
	}
	return startReceiver(t, d)
}

// newTestEngine starts an engine on free loopback ports.
func newTestEngine(t *testing.T, opts Options, replay bool) *Engine {
	t.Helper()
	opts.Endpoint = "tcp://127.0.0.1:0"
	if replay {
		opts.ReplayEndpoint = "tcp://127.0.0.1:0"
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// waitJoined beats the slow-joiner problem: it publishes heartbeats until
// the SUB receives one, then consumes the rest of them, so the next message
// the SUB gets is the next seq the engine publishes.
func waitJoined(t *testing.T, e *Engine, sub *receiver) {
	t.Helper()
	deadline := time.Now().Add(recvTimeout)
	for time.Now().Before(deadline) {
		if err := e.Publish(); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-sub.msgs:
			last := e.Stats().NextSeq - 1
			for seqOf(t, m) != last {
				m = sub.next(t)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("SUB never joined")
}

// seqOf checks a published message's frames and returns its seq.
func seqOf(t *testing.T, m zmq4.Msg) uint64 {
	t.Helper()
	if len(m.Frames) != 3 || len(m.Frames[1]) != 8 {
		t.Fatalf("message %v: want 3 frames with an 8-byte seq", m)
	}
	return binary.BigEndian.Uint64(m.Frames[1])
}
