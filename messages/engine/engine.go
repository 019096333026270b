// Package engine holds what differs between inference engines that publish KV
// events: how block hashes are folded, the replay reply layout, the topic
// convention, and how a stream's sequence numbers start. Everything else
// (the batch and event encodings) is common and lives in package wire.
//
// Most engines are data (a Family value), so adding one is one file:
//
//	// messages/engine/myengine.go
//	package engine
//
//	func init() {
//		Register(Family{Key: "myengine", Traits: StreamTraits{SeqStartsAtZero: true},
//			Shows: EvidenceMapEvents, Never: EvidenceTimestampSeq})
//	}
//
// An engine that needs other behaviour implements Adapter itself. The
// formats the adapters read are described in messages/wire/README.md.
//
// Each registration chooses its engine (Choose): Auto, the default, decides
// per stream from what the stream shows (Detector); an explicit engine is
// followed, and a stream that contradicts it is reported. README.md beside
// this file gives the rules, and what Auto does before the first batch.
package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kvrouter/kvrouter/messages/wire"
)

// Adapter describes one engine family.
type Adapter interface {
	// Name is the registry key ("vllm", "sglang", "trtllm").
	Name() string
	// NewDecoder returns a batch decoder with this engine's hash fold.
	NewDecoder(lim wire.Limits) *wire.Decoder
	// ParseReplay parses one message received on a replay DEALER socket.
	ParseReplay(frames [][]byte) (ReplayReply, error)
	// ParseTopic extracts the worker (pod) and model from a topic, when the
	// engine's deployments follow a convention; ok is false otherwise.
	ParseTopic(topic []byte) (t Topic, ok bool)
	// Stream says how the engine numbers and paces its batches.
	Stream() StreamTraits
	// Evidence is what tells the engine's streams apart (Detector): shows,
	// what names it when no other engine fits; never, what it never sends.
	Evidence() (shows, never Evidence)
}

// StreamTraits are the sequence-number habits of an engine's publisher.
type StreamTraits struct {
	// SeqStartsAtZero: a fresh publisher's first seq is 0, so a listener
	// that first sees seq N > 0 knows N batches came before it. When false
	// (older TensorRT-LLM publishers start at a nanosecond timestamp)
	// the first seq seen is only a baseline.
	SeqStartsAtZero bool
	// SeqStartDetected (Auto): each publisher's first seq says how it
	// counts — a nanosecond timestamp (IsTimestampSeq) is a baseline, as
	// without SeqStartsAtZero; a smaller seq counts from 0, as with it.
	SeqStartDetected bool
}

// TimestampSeqFloor is the smallest seq read as a nanosecond timestamp
// (2001-09-09 in Unix nanoseconds): older TensorRT-LLM publishers start
// their seqs at their start time, while a count from 0 never gets near it.
const TimestampSeqFloor = 1_000_000_000_000_000_000

// IsTimestampSeq reports whether seq is a nanosecond timestamp rather than
// a count from 0.
func IsTimestampSeq(seq uint64) bool { return seq >= TimestampSeqFloor }

// Auto is the engine choice that decides per stream from what the stream
// shows (Detector). Until it decides, its adapter does what every engine
// shares: the replay request every engine understands, both replay reply
// layouts, the common decoder (every layout, the shared hash fold), the
// kv@pod@model topic convention, and the seq start read from the first
// seq (SeqStartDetected).
const Auto = "auto"

// auto is Auto's adapter; it is not in the registry (Names lists engines).
var auto Adapter = Family{Key: Auto, Traits: StreamTraits{SeqStartDetected: true}}

var registry = map[string]Adapter{}

// Register adds an adapter; it panics on a duplicate name (a programming
// error caught at init).
func Register(a Adapter) {
	if _, dup := registry[a.Name()]; dup {
		panic("engine: adapter registered twice: " + a.Name())
	}
	registry[a.Name()] = a
}

// Lookup returns the adapter registered under name.
func Lookup(name string) (Adapter, error) {
	a, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q (known: %v)", name, Names())
	}
	return a, nil
}

// Choose returns the adapter of an engine choice: Auto (also "") or a
// registered engine.
func Choose(name string) (Adapter, error) {
	if name == "" || name == Auto {
		return auto, nil
	}
	if _, ok := registry[name]; !ok {
		return nil, fmt.Errorf("unknown engine %q (want %s)", name, strings.Join(Choices(), ", "))
	}
	return registry[name], nil
}

// Choices lists the accepted engine choices: Auto, then the registered
// engines, sorted.
func Choices() []string { return append([]string{Auto}, Names()...) }

// Names lists the registered engines, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return slices.Clip(names)
}
