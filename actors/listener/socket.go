package listener

import (
	"bytes"
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/zmtpguard"
	"github.com/kvrouter/kvrouter/messages/engine"
)

// Messages from the socket goroutines to their listener actor.
type (
	// subscribed: the subscription is in place (again).
	subscribed struct{}
	// socketError: the socket failed (a broken connection, a refused
	// dial); it is recreated after a backoff.
	socketError struct{ err string }
	liveBatch   struct {
		topic   []byte
		seq     uint64
		payload []byte
	}
	badFrame    struct{ why string } // a message that is not [topic, seq8, payload]
	replayBatch struct {
		gen     uint64
		seq     uint64
		payload []byte
	}
	replayDone struct {
		gen     uint64
		timeout bool
		err     string
	}
)

// subscribe runs the SUB socket until ctx ends: connect (or bind), subscribe,
// receive, validate frames, hand batches to send; recreate the socket after
// an error or, for a dialing socket, after cfg.Silence without a message.
func subscribe(ctx context.Context, cfg Config, c *credits, send func(any)) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, cfg, c, send)
		if err != nil && ctx.Err() == nil {
			send(socketError{err: err.Error()})
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// subscribeOnce runs one socket incarnation; it returns nil when it was
// recreated for silence.
func subscribeOnce(ctx context.Context, cfg Config, c *credits, send func(any)) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// No zmq4 automatic reconnect: it redials from a library goroutine that
	// races with Close (seen with -race). A lost peer shows as silence, and
	// silence recreates the socket.
	sock := zmq4.NewSub(sctx, zmq4.WithDialerRetry(200*time.Millisecond))
	defer sock.Close()
	ep, err := zmtpguard.Endpoint(cfg.Endpoint)
	if err != nil {
		return err
	}
	if cfg.Bind {
		err = sock.Listen(ep)
	} else {
		err = sock.Dial(ep)
	}
	if err != nil {
		return err
	}
	if err := sock.SetOption(zmq4.OptionSubscribe, cfg.Topic); err != nil {
		return err
	}
	send(subscribed{})
	var watchdog *time.Timer
	var silent atomic.Bool
	if !cfg.Bind && cfg.Silence > 0 {
		watchdog = time.AfterFunc(cfg.Silence, func() { silent.Store(true); cancel() })
		defer watchdog.Stop()
	}
	topic := []byte(cfg.Topic)
	for {
		msg, err := sock.Recv()
		if err != nil {
			if silent.Load() || ctx.Err() != nil {
				return nil
			}
			return err
		}
		if watchdog != nil {
			watchdog.Reset(cfg.Silence)
		}
		if len(msg.Frames) != 3 {
			send(badFrame{why: "frame_count"})
			continue
		}
		if len(msg.Frames[1]) != 8 {
			send(badFrame{why: "seq_frame"})
			continue
		}
		if !bytes.HasPrefix(msg.Frames[0], topic) {
			send(badFrame{why: "topic"})
			continue
		}
		if !c.take(ctx) {
			return nil
		}
		send(liveBatch{topic: msg.Frames[0], seq: binary.BigEndian.Uint64(msg.Frames[1]), payload: msg.Frames[2]})
	}
}

// replay asks the engine's replay endpoint for every batch with seq ≥ from
// and hands the answers to send, then a replayDone. A fresh DEALER per
// replay: cancelling ctx discards whatever an abandoned replay still sends.
// Like the subscription it takes a credit before handing a batch over, so
// a long replay stays within the listener's window; the timeout bounds the
// engine's silence, not the time spent waiting for credits.
func replay(ctx context.Context, cfg Config, c *credits, adapter engine.Adapter, gen, from uint64, send func(any)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(cfg.ReplayTimeout, func() { timedOut.Store(true); cancel() })
	defer watchdog.Stop()
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerRetry(100*time.Millisecond))
	defer sock.Close()
	done := func(timeout bool, err string) { send(replayDone{gen: gen, timeout: timeout, err: err}) }
	ep, err := zmtpguard.Endpoint(cfg.ReplayEndpoint)
	if err == nil {
		err = sock.Dial(ep)
	}
	if err != nil {
		done(false, "dial: "+err.Error())
		return
	}
	if err := sock.SendMulti(zmq4.NewMsgFrom(engine.ReplayRequest(from)...)); err != nil {
		done(timedOut.Load(), "send: "+err.Error())
		return
	}
	for {
		msg, err := sock.Recv()
		if err != nil {
			done(timedOut.Load(), "")
			return
		}
		r, err := adapter.ParseReplay(msg.Frames)
		if err != nil {
			done(false, err.Error())
			return
		}
		if r.End {
			done(false, "")
			return
		}
		watchdog.Stop()
		if !c.take(ctx) {
			done(timedOut.Load(), "") // a timeout, or abandoned: then ignored
			return
		}
		send(replayBatch{gen: gen, seq: r.Seq, payload: r.Payload})
		watchdog.Reset(cfg.ReplayTimeout)
	}
}
