package listener

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/zmtpguard"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
)

// Config describes one engine publisher endpoint.
type Config struct {
	Stream messages.StreamID
	// Engine is the engine choice (engine.Choose): auto (also "", the
	// default: decided per stream from what it shows), vllm, sglang or
	// trtllm.
	Engine string
	// Endpoint is the engine's PUB address (tcp://host:port; ipc://path and
	// inproc://name work too, no other transport). With Bind the listener
	// binds it and engines dial in (llm-d style).
	Endpoint string
	Bind     bool
	// ReplayEndpoint is the engine's replay ROUTER ("" when it has none).
	ReplayEndpoint string
	// Topic is the subscription prefix ("" = everything); it is re-checked
	// on every message.
	Topic string
	// BlockSize is the worker's block size (0: trust the engine's).
	BlockSize int
	// Window bounds batches in flight (default 256).
	Window int
	// ReplayTimeout bounds the replay endpoint's silence: the wait for its
	// first answer and between answers, not the time its batches wait for
	// the window (default 2 s).
	ReplayTimeout time.Duration
	// Silence recreates a dialing socket after this long without a message
	// (default 10 s; 0 keeps the default, negative disables). zmq4 dialers
	// do not reconnect by themselves after a peer restart (its automatic
	// reconnect races with Close), so this is how a restarted engine is found
	// again; batches published meanwhile are recovered by replay.
	Silence time.Duration
	// TopicIdentity tells engines apart by the topic convention
	// kv@<pod>@<model> — for one socket that many engines publish on: a
	// bound socket they dial (llm-d style), or a dialed one (a forwarder).
	// Each pod is its own stream (own sequence numbers, no replay: its
	// replay endpoint is not known); its worker id is Pods[pod], or a
	// stable hash of the pod name when unmapped.
	TopicIdentity bool
	Pods          map[string]messages.WorkerID
	// CurrentPods, when set, is read instead of Pods by each incarnation
	// of the actor as it starts: the owner's current map, which it changes
	// with AddPod and ForgetPod, so a restarted listener keeps the pods
	// added since it was configured.
	CurrentPods func() map[string]messages.WorkerID
	// KnownPodsOnly refuses pods the map does not name (unknown_pod)
	// instead of giving them the hash of their name: kvrouter serve, whose
	// registrations name every worker it routes to.
	KnownPodsOnly bool
	// MaxStreams caps the pods one socket tracks (default 1024); messages of
	// further pods are dropped and counted.
	MaxStreams int
	// Resume, when set, starts the stream at a position loaded from a
	// peer's dump whose state the index already holds (Tracker.Resume); its
	// Stream must be this Config's. Not with TopicIdentity.
	Resume *messages.Position
	// Next receives the stream's EngineBatches (the normalizer pool).
	Next *actor.PID
}

func (c *Config) defaults() error {
	if c.Endpoint == "" {
		return errors.New("listener: no endpoint")
	}
	// Only endpoints whose connections are guarded (zmtpguard: frame sizes
	// capped) are accepted.
	for _, ep := range []string{c.Endpoint, c.ReplayEndpoint} {
		if _, err := zmtpguard.Endpoint(ep); ep != "" && err != nil {
			return fmt.Errorf("listener: %w", err)
		}
	}
	if c.Engine == "" {
		c.Engine = engine.Auto
	}
	if _, err := engine.Choose(c.Engine); err != nil {
		return fmt.Errorf("listener: %w", err)
	}
	if c.Next == nil {
		return errors.New("listener: no next stage")
	}
	if c.Resume != nil && (c.TopicIdentity || c.Resume.Stream != c.Stream) {
		return errors.New("listener: a resume position names the configured stream, not a socket shared by topic")
	}
	if c.TopicIdentity && c.ReplayEndpoint != "" {
		return errors.New("listener: a replay endpoint names one engine; it cannot serve a socket shared by topic")
	}
	if !c.TopicIdentity && (c.Pods != nil || c.CurrentPods != nil || c.KnownPodsOnly) {
		return errors.New("listener: pods map the topics of a socket shared by topic: set TopicIdentity")
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 1024
	}
	if c.Window <= 0 {
		c.Window = 256
	}
	if c.ReplayTimeout <= 0 {
		c.ReplayTimeout = 2 * time.Second
	}
	if c.Silence == 0 {
		c.Silence = 10 * time.Second
	}
	return nil
}
