package simengine

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/go-zeromq/zmq4"
)

// replayEntry is one published (or dropped) batch kept for replay.
type replayEntry struct {
	seq     uint64
	payload []byte
}

// replayRing keeps the last max batches in publication order.
type replayRing struct {
	buf  []replayEntry
	head int // index of the oldest entry once the ring is full
	max  int
}

func (r *replayRing) init(max int) {
	r.max = max
	r.reset()
}

func (r *replayRing) reset() {
	r.buf = make([]replayEntry, 0, min(r.max, 1024))
	r.head = 0
}

func (r *replayRing) add(seq uint64, payload []byte) {
	if r.max == 0 {
		return
	}
	if len(r.buf) < r.max {
		r.buf = append(r.buf, replayEntry{seq, payload})
		return
	}
	r.buf[r.head] = replayEntry{seq, payload}
	r.head = (r.head + 1) % r.max
}

// from appends, oldest first, every entry with seq ≥ start.
func (r *replayRing) from(start uint64, dst []replayEntry) []replayEntry {
	for i := range r.buf {
		e := r.buf[(r.head+i)%len(r.buf)]
		if e.seq >= start {
			dst = append(dst, e)
		}
	}
	return dst
}

// endSeq is the end-of-replay marker's seq frame (vLLM's (-1).to_bytes(8)).
var endSeq = bytes.Repeat([]byte{0xff}, 8)

// serveReplay answers replay requests until the ROUTER is closed. Unlike
// vLLM it does not share the publishing thread: a long replay does not
// delay publication.
func (e *Engine) serveReplay() {
	defer close(e.replayDone)
	for {
		msg, err := e.router.Recv()
		if err != nil {
			e.mu.Lock()
			closed := e.closed
			e.mu.Unlock()
			if closed {
				return
			}
			time.Sleep(10 * time.Millisecond) // a transient error: do not spin
			continue
		}
		e.answerReplay(msg.Frames)
	}
}

// answerReplay serves one request [identity, "", start_seq 8B BE]: every
// buffered batch with seq ≥ start, then the end marker. Malformed requests
// are counted and ignored, as vLLM does.
func (e *Engine) answerReplay(frames [][]byte) {
	e.mu.Lock()
	if len(frames) != 3 || len(frames[1]) != 0 || len(frames[2]) != 8 {
		e.stats.BadReplayRequests++
		e.mu.Unlock()
		return
	}
	id := frames[0]
	entries := e.ring.from(binary.BigEndian.Uint64(frames[2]), nil)
	topic := []byte(e.opts.Topic)
	legacy := e.opts.LegacyReplay
	e.stats.ReplayRequests++
	e.stats.ReplayedBatches += uint64(len(entries))
	e.mu.Unlock()

	for _, en := range entries {
		if err := e.router.SendMulti(replayMsg(id, legacy, topic, seqFrame(en.seq), en.payload)); err != nil {
			return // the client is gone or the engine is closing
		}
	}
	_ = e.router.SendMulti(replayMsg(id, legacy, nil, endSeq, nil))
}

// replayMsg builds one reply in the configured layout:
//
//	vLLM ≥ 0.26: [id, "", topic, seq8, payload]   end: [id, "", "", ff×8, ""]
//	legacy:      [id, "", seq8, payload]          end: [id, "", ff×8, ""]
func replayMsg(id []byte, legacy bool, topic, seq, payload []byte) zmq4.Msg {
	if legacy {
		return zmq4.NewMsgFrom(id, []byte{}, seq, nonNil(payload))
	}
	return zmq4.NewMsgFrom(id, []byte{}, nonNil(topic), seq, nonNil(payload))
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
