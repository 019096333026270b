package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// ReplayReply is one message from an engine's replay ROUTER.
type ReplayReply struct {
	// End marks the end-of-replay marker; the other fields are then empty.
	End     bool
	Topic   []byte // empty for the 3-frame layout
	Seq     uint64
	Payload []byte
}

// ReplayRequest returns the frames a DEALER sends to ask for every buffered
// batch with seq ≥ start: ["", start as 8 bytes big-endian].
func ReplayRequest(start uint64) [][]byte {
	return [][]byte{{}, binary.BigEndian.AppendUint64(nil, start)}
}

var endSeq = bytes.Repeat([]byte{0xff}, 8)

// ParseReplayFrames accepts both replay reply layouts:
//
//	vLLM ≥ 0.26:          ["", topic, seq8, payload], end ["", "", ff×8, ""]
//	older vLLM, SGLang:   ["", seq8, payload],        end ["", ff×8, ""]
//
// An empty last frame or an all-0xFF seq ends the replay.
func ParseReplayFrames(frames [][]byte) (ReplayReply, error) {
	if len(frames) > 0 && len(frames[0]) == 0 {
		frames = frames[1:] // the DEALER-side empty delimiter
	}
	var r ReplayReply
	var seq []byte
	switch len(frames) {
	case 3:
		r.Topic, seq, r.Payload = frames[0], frames[1], frames[2]
	case 2:
		seq, r.Payload = frames[0], frames[1]
	default:
		return r, fmt.Errorf("replay reply has %d frames after the delimiter, want 2 or 3", len(frames))
	}
	if len(seq) != 8 {
		return r, fmt.Errorf("replay reply seq frame has %d bytes, want 8", len(seq))
	}
	if len(r.Payload) == 0 || bytes.Equal(seq, endSeq) {
		return ReplayReply{End: true}, nil
	}
	r.Seq = binary.BigEndian.Uint64(seq)
	return r, nil
}
