package zmtpguard

import (
	"fmt"
	"strconv"
)

// MaxMessageSize caps the bytes one received ZeroMQ message may declare, all
// its frames together (commands count as messages of one frame): 256 MiB,
// far above any KV-event batch (wire.Limits bounds a batch's events long
// before that). A connection whose peer declares more is closed.
const MaxMessageSize = 256 << 20

// ErrMessageTooLarge is the read error of a connection whose peer declared
// a message over MaxMessageSize. It is a net.Error that is not a timeout,
// so zmq4 marks the connection closed and drops it, as for any broken
// connection; its text does not vary, so it counts as one reason.
var ErrMessageTooLarge error = tooLarge{}

type tooLarge struct{}

func (tooLarge) Error() string {
	return "zmtpguard: a ZMTP message over " + strconv.Itoa(MaxMessageSize>>20) + " MiB (MaxMessageSize): connection closed"
}
func (tooLarge) Timeout() bool   { return false }
func (tooLarge) Temporary() bool { return false }

// ZMTP 3.x framing (the part of it zmq4's reader follows): a 64-byte
// greeting, then frames, each a flags byte, a size (1 byte, or 8 bytes
// big-endian with flagLong) and the body. Commands are frames too
// (flagCommand); the guard treats them alike.
const (
	greetingLen = 64
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// Where a guard stands in the stream.
const (
	inGreeting  uint8 = iota // left: greeting bytes still to come
	atFlags                  // the next byte is a frame's flags
	inShortSize              // the next byte is a short frame's size
	inLongSize               // left: bytes of the 8-byte size still to come
	inBody                   // left: body bytes still to come
	refused                  // a header over the cap was seen: the stream stops
)

// guard is a pure state machine over the bytes a ZMTP 3.x peer sends,
// in the order zmq4 reads them: it follows the greeting and each frame
// header and refuses the header that takes the current message over max.
// It reads exactly what zmq4's reader reads (a fixed 64-byte greeting,
// then frames, reserved flag bits ignored), so it cannot fall out of step
// with it. The zero value is not ready: use newGuard.
type guard struct {
	max   uint64 // cap on one message's declared bytes
	state uint8
	more  bool   // the current frame's MORE flag
	left  uint64 // bytes left in the greeting, the long size or the body
	size  uint64 // the long size read so far
	total uint64 // declared bytes of the current message's frames so far
	// declared is what the refused message declared (total plus the
	// refused frame's size, saturated), for the log.
	declared uint64
	command  bool // the refused frame was a command
}

func newGuard(max uint64) guard { return guard{max: max, left: greetingLen} }

// scan advances over p, the next bytes of the stream. It returns false
// when p holds (the end of) a frame header that takes the current message
// over max; from then on every scan returns false.
//
// The hot path is a frame body: one comparison per call, whatever its
// length. Headers are walked byte by byte (2 or 9 bytes per frame).
func (g *guard) scan(p []byte) bool {
	for len(p) > 0 {
		switch g.state {
		case inGreeting, inBody:
			if uint64(len(p)) < g.left {
				g.left -= uint64(len(p))
				return true
			}
			p = p[g.left:]
			g.left, g.state = 0, atFlags
		case atFlags:
			f := p[0]
			p = p[1:]
			g.more, g.command = f&flagMore != 0, f&flagCommand != 0
			if f&flagLong != 0 {
				g.state, g.size, g.left = inLongSize, 0, 8
			} else {
				g.state = inShortSize
			}
		case inShortSize:
			size := uint64(p[0])
			p = p[1:]
			if !g.frame(size) {
				return false
			}
		case inLongSize:
			k := min(uint64(len(p)), g.left)
			for _, b := range p[:k] {
				g.size = g.size<<8 | uint64(b)
			}
			p, g.left = p[k:], g.left-k
			if g.left == 0 && !g.frame(g.size) {
				return false
			}
		default: // refused
			return false
		}
	}
	return g.state != refused
}

// frame accounts a frame header declaring size bytes; false refuses it.
func (g *guard) frame(size uint64) bool {
	if size > g.max-g.total { // total ≤ max always: no wrap-around
		g.state, g.declared = refused, g.total+min(size, ^uint64(0)-g.total)
		return false
	}
	g.total += size
	if !g.more {
		g.total = 0 // the message ends with this frame
	}
	g.left, g.state = size, inBody
	if size == 0 {
		g.state = atFlags
	}
	return true
}

// refusal describes what was refused, for the log.
func (g *guard) refusal() string {
	kind := "message"
	if g.command {
		kind = "command"
	}
	return fmt.Sprintf("%s declaring %d bytes over the cap of %d", kind, g.declared, g.max)
}
