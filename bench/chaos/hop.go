package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// HopOptions configure a Hop.
type HopOptions struct {
	// Faults are the message faults by ordinal (EnginePlan.MessageFaults);
	// ordinals count the messages received after Arm.
	Faults map[int]Fault
	// HWM bounds the messages the hop's PUB queues toward a slow router
	// (0: zmq4's default, unbounded). Past it messages are dropped, as an
	// engine's PUB drops at its high-water mark.
	HWM int
}

// HopStats are a Hop's counters.
type HopStats struct {
	Received  uint64 // messages read from the engine
	Forwarded uint64 // messages written toward the router (copies included)
	LastSeq   uint64 // seq of the last well-framed message received
	Injected  map[FaultKind]int
	Rebinds   int    // Cut faults carried out
	Errors    uint64 // send or rebind errors
}

// Hop is a fault-injecting ZeroMQ hop between one engine and the router: a
// SUB dialing the engine's PUB and a PUB the router's listener dials. It
// forwards [topic, seq, payload] messages and, once armed, applies its
// plan's message faults. The replay endpoint is not proxied: the router
// talks to the engine's directly (or not at all).
type Hop struct {
	opts     HopOptions
	sub      zmq4.Socket
	ctx      context.Context
	cancel   context.CancelFunc
	endpoint string
	done     chan struct{}

	mu      sync.Mutex
	pub     zmq4.Socket
	armed   bool
	ordinal int
	held    []heldMsg // Reorder: messages waiting for later ones
	stats   HopStats
}

type heldMsg struct {
	msg   zmq4.Msg
	after int // forward once this many more messages have been received
}

// NewHop dials engineEndpoint and binds its PUB on a free loopback port.
func NewHop(engineEndpoint string, opts HopOptions) (*Hop, error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hop{opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		stats: HopStats{Injected: map[FaultKind]int{}}}
	h.sub = zmq4.NewSub(ctx, zmq4.WithDialerRetry(20*time.Millisecond))
	if err := h.sub.Dial(engineEndpoint); err != nil {
		cancel()
		h.sub.Close()
		return nil, fmt.Errorf("chaos: hop SUB to %s: %w", engineEndpoint, err)
	}
	if err := h.sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		cancel()
		h.sub.Close()
		return nil, err
	}
	pub, err := h.bind("tcp://127.0.0.1:0")
	if err != nil {
		cancel()
		h.sub.Close()
		return nil, err
	}
	h.pub, h.endpoint = pub, "tcp://"+pub.Addr().String()
	go h.run()
	return h, nil
}

func (h *Hop) bind(endpoint string) (zmq4.Socket, error) {
	pub := zmq4.NewPub(h.ctx)
	if h.opts.HWM > 0 {
		if err := pub.SetOption(zmq4.OptionHWM, h.opts.HWM); err != nil {
			pub.Close()
			return nil, err
		}
	}
	if err := pub.Listen(endpoint); err != nil {
		pub.Close()
		return nil, fmt.Errorf("chaos: hop PUB on %s: %w", endpoint, err)
	}
	return pub, nil
}

// Endpoint is the address the router's listener dials.
func (h *Hop) Endpoint() string { return h.endpoint }

// Arm starts applying faults: the next message received has ordinal 0.
func (h *Hop) Arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.ordinal = true, 0
}

// Stats returns the counters so far.
func (h *Hop) Stats() HopStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.Injected = make(map[FaultKind]int, len(h.stats.Injected))
	for k, v := range h.stats.Injected {
		s.Injected[k] = v
	}
	return s
}

// Close stops forwarding and closes both sockets.
func (h *Hop) Close() error {
	h.cancel()
	err := h.sub.Close()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return errors.Join(err, h.pub.Close())
}

func (h *Hop) run() {
	defer close(h.done)
	for {
		msg, err := h.sub.Recv()
		if err != nil {
			if h.ctx.Err() != nil {
				return
			}
			continue // a lost engine connection: the SUB dials again
		}
		h.handle(msg)
	}
}

// handle applies the fault planned for one message, then releases the held
// messages whose wait is over.
func (h *Hop) handle(msg zmq4.Msg) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.Received++
	if len(msg.Frames) == 3 && len(msg.Frames[1]) == 8 {
		h.stats.LastSeq = binary.BigEndian.Uint64(msg.Frames[1])
	}
	f, planned := Fault{}, false
	if h.armed {
		f, planned = h.opts.Faults[h.ordinal]
		h.ordinal++
	}
	if planned {
		h.stats.Injected[f.Kind]++
	}
	switch {
	case !planned:
		h.send(msg)
	case f.Kind == Drop:
	case f.Kind == Duplicate:
		h.send(msg)
		h.send(msg)
	case f.Kind == Reorder:
		h.held = append(h.held, heldMsg{msg: msg, after: f.Arg + 1})
	case f.Kind == Truncate:
		h.send(zmq4.NewMsgFrom(msg.Frames[:len(msg.Frames)-1]...))
	case f.Kind == Corrupt:
		h.send(corrupt(msg))
	case f.Kind == Cut:
		h.rebind()
	}
	kept := h.held[:0]
	for _, m := range h.held {
		if m.after--; m.after <= 0 {
			h.send(m.msg)
		} else {
			kept = append(kept, m)
		}
	}
	h.held = kept
}

// corrupt damages the payload so that it is no batch: it gains a leading
// 0xc1, a code msgpack never uses.
func corrupt(msg zmq4.Msg) zmq4.Msg {
	frames := append([][]byte(nil), msg.Frames...)
	last := append([]byte{0xc1}, frames[len(frames)-1]...)
	frames[len(frames)-1] = last
	return zmq4.NewMsgFrom(frames...)
}

func (h *Hop) send(msg zmq4.Msg) {
	if err := h.pub.SendMulti(msg); err != nil {
		h.stats.Errors++
		return
	}
	h.stats.Forwarded++
}

// rebind closes the PUB and binds a new one on the same address (retrying
// briefly while the port is released).
func (h *Hop) rebind() {
	addr := h.endpoint
	_ = h.pub.Close()
	for try := 0; ; try++ {
		pub, err := h.bind(addr)
		if err == nil {
			h.pub = pub
			h.stats.Rebinds++
			return
		}
		if try == 50 || h.ctx.Err() != nil {
			h.stats.Errors++
			h.pub = zmq4.NewPub(h.ctx) // unbound: later sends go nowhere
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
