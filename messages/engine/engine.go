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
//		Register(Family{Key: "myengine", Traits: StreamTraits{SeqStartsAtZero: true}})
//	}
//
// An engine that needs other behaviour implements Adapter itself. The
// formats the adapters read are described in messages/wire/README.md.
package engine

import (
	"fmt"
	"slices"
	"sort"

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
}

// StreamTraits are the sequence-number habits of an engine's publisher.
type StreamTraits struct {
	// SeqStartsAtZero: a fresh publisher's first seq is 0, so a listener
	// that first sees seq N > 0 knows N batches came before it. When false
	// (TensorRT-LLM starts at a nanosecond timestamp) the first seq seen is
	// only a baseline.
	SeqStartsAtZero bool
	// Heartbeats: the publisher sends empty batches periodically, so
	// silence longer than HeartbeatEvery means the peer is gone.
	Heartbeats bool
	// HeartbeatEverySeconds is the publisher's heartbeat period.
	HeartbeatEverySeconds int
}

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

// Names lists the registered engines, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return slices.Clip(names)
}
