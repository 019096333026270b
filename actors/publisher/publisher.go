// Package publisher republishes the RouterEvents kvrouter applies on a
// ZeroMQ PUB socket, for external consumers (Dynamo-compatible encoding,
// package routerevent). Each message is three frames like an engine's:
// [topic, seq as 8-byte big-endian, one encoded RouterEvent], seq counting
// from 0 per publisher.
package publisher

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/zmtpguard"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// DefaultTopic is the topic frame of republished events.
const DefaultTopic = "kvrouter.router_events"

// HWM bounds the messages queued per slow subscriber; past it the PUB drops
// (subscribers see a seq gap).
const HWM = 10000

// Stats are the publisher's counters.
type Stats struct {
	Published uint64
	Errors    uint64
	Seq       uint64 // next seq
	// Topics are the topic prefixes the connected subscribers asked for
	// (sorted): a subscriber's subscription has reached the PUB once its
	// prefix is here, and only then does it get what is published.
	Topics []string
}

// StatsRequest asks for Stats.
type StatsRequest struct{}

// Props binds a PUB socket on endpoint and returns the actor that publishes
// every RouterEventBatch it receives, in order. The socket is closed when
// the actor stops.
func Props(endpoint, topic string) (*actor.Props, error) {
	// Through the guarded transport: the PUB reads its subscribers'
	// subscriptions, and a subscriber must not declare a terabyte.
	ep, err := zmtpguard.Endpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("publish router events: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sock := zmq4.NewPub(ctx)
	if err := sock.Listen(ep); err != nil {
		cancel()
		return nil, fmt.Errorf("publish router events on %s: %w", endpoint, err)
	}
	if err := sock.SetOption(zmq4.OptionHWM, HWM); err != nil {
		sock.Close()
		cancel()
		return nil, fmt.Errorf("publish router events: set HWM: %w", err)
	}
	if topic == "" {
		topic = DefaultTopic
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &pub{sock: sock, cancel: cancel, topic: []byte(topic)}
	}), nil
}

type pub struct {
	sock   zmq4.Socket
	cancel context.CancelFunc
	topic  []byte
	buf    []byte
	stats  Stats
	log    *slog.Logger
}

func (p *pub) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.log = ctx.Logger()
	case *messages.RouterEventBatch:
		for _, ev := range m.Events {
			if ev.Event.Kind == messages.KindOffloaded {
				continue // kvrouter-internal (no id, no Dynamo variant): resolved by the index
			}
			p.buf = routerevent.Encode(p.buf[:0], ev)
			seq := binary.BigEndian.AppendUint64(make([]byte, 0, 8), p.stats.Seq)
			payload := append([]byte(nil), p.buf...)
			if err := p.sock.Send(zmq4.NewMsgFrom(p.topic, seq, payload)); err != nil {
				p.stats.Errors++
				if p.stats.Errors == 1 {
					p.log.Warn("publishing router events failed", "err", err)
				}
				continue
			}
			p.stats.Seq++
			p.stats.Published++
		}
	case *StatsRequest:
		s := p.stats
		if t, ok := p.sock.(zmq4.Topics); ok {
			s.Topics = t.Topics()
		}
		ctx.Respond(&s)
	case *actor.Stopped:
		p.sock.Close()
		p.cancel()
	}
}
