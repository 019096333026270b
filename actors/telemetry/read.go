package telemetry

import (
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	"go.opentelemetry.io/otel/attribute"
)

// Label names. Every label is bounded: worker ids and dp ranks (one series
// per registered stream), index shard numbers, and closed sets (kinds,
// reasons, results, states). Session and request ids are never labels.
const (
	labelWorker  = attribute.Key("worker")
	labelDpRank  = attribute.Key("dp_rank")
	labelKind    = attribute.Key("kind")
	labelOutcome = attribute.Key("outcome")
	labelReason  = attribute.Key("reason")
	labelResult  = attribute.Key("result")
	labelState   = attribute.Key("state")
	labelActor   = attribute.Key("actor")
	labelShard   = attribute.Key("shard")
	labelEngine  = attribute.Key("engine")
	labelStage   = attribute.Key("stage")
	// labelEndpoint is a socket shared by topic's endpoint (one series
	// per such socket a registration names).
	labelEndpoint = attribute.Key("endpoint")
)

// Worker states as reported by the state gauge (as /workers reports them).
const (
	stateExact      = "exact"
	stateRecovering = "recovering" // a replay is running, or no batch yet
	stateDegraded   = "degraded"
)

var states = [...]string{stateExact, stateRecovering, stateDegraded}

// series holds one instrument's values by label set, summed.
type series map[attribute.Distinct]*point

type point struct {
	set attribute.Set
	v   float64
}

func (s series) add(v float64, kv ...attribute.KeyValue) {
	set := attribute.NewSet(kv...)
	p := s[set.Equivalent()]
	if p == nil {
		p = &point{set: set}
		s[set.Equivalent()] = p
	}
	p.v += v
}

// readings are one scrape's ingest figures.
type readings struct {
	events, hints, batches, gaps, replays, resyncs, recoveries, lost, dropped, lag, state, blocks, stored, contradictions, refused series
	sessions                                                                                                                       sessionReadings
	errors                                                                                                                         int // requests that failed (figures left out)
}

// read asks every pipeline for its counters, each request bounded by
// timeout; what does not answer is left out and counted in errors.
func read(pipes []Pipeline, timeout time.Duration) *readings {
	r := &readings{events: series{}, hints: series{}, batches: series{}, gaps: series{}, replays: series{}, resyncs: series{},
		recoveries: series{}, lost: series{}, dropped: series{}, lag: series{}, state: series{}, blocks: series{}, stored: series{}, contradictions: series{}, refused: series{},
		sessions: newSessionReadings()}
	for _, p := range pipes {
		if st, err := p.Status(timeout); err != nil {
			r.errors++
		} else {
			for id, ss := range st.Streams {
				r.stream(p, id, ss, timeout)
			}
		}
		if socks, err := p.SharedSocketStats(timeout); err != nil {
			r.errors++
		} else {
			r.sharedSockets(socks)
		}
		if ix, err := p.IndexStats(timeout); err != nil {
			r.errors++
		} else {
			r.index(ix)
		}
		if ss, err := p.SessionStats(timeout); err != nil {
			r.errors++
		} else {
			r.sessions.add(ss)
		}
	}
	return r
}

// sharedSockets adds the messages each socket shared by topic refused
// before they reached a pod's stream. Its socket errors are left out: each
// pod's view counts them already (dropped).
func (r *readings) sharedSockets(socks map[string]*listener.Stats) {
	for ep, ls := range socks {
		for why, n := range ls.BadFrames {
			if !strings.HasPrefix(why, "socket:") {
				r.refused.add(float64(n), labelEndpoint.String(ep), labelReason.String(why))
			}
		}
	}
}

// index adds the index's blocks and stored blocks applied, per shard
// (shard 0 for an index that reports no shards).
func (r *readings) index(ix *indexer.Stats) {
	if len(ix.Shards) == 0 {
		r.blocks.add(float64(ix.Size.Blocks), labelShard.String("0"))
	}
	for i, sz := range ix.Shards {
		r.blocks.add(float64(sz.Blocks), labelShard.String(strconv.Itoa(i)))
	}
	if len(ix.ShardStoredBlocks) == 0 {
		r.stored.add(float64(ix.StoredBlocks), labelShard.String("0"))
	}
	for i, n := range ix.ShardStoredBlocks {
		r.stored.add(float64(n), labelShard.String(strconv.Itoa(i)))
	}
}

// stream reads one stream's listener and normalizer counters.
func (r *readings) stream(p Pipeline, id messages.StreamID, ss coalescer.StreamStatus, timeout time.Duration) {
	w, d := labelWorker.Int64(int64(id.Worker)), labelDpRank.Int64(int64(id.DpRank))
	r.lag.add(ss.Lag.Seconds(), w, d)
	recovering := false
	if ls, err := p.ListenerStats(id, timeout); err != nil {
		r.errors++
	} else {
		r.listener(ls, w, d)
		recovering = ls.Recovering()
	}
	current := StateOf(ss.State, recovering)
	for _, s := range states {
		v := 0.0
		if s == current {
			v = 1
		}
		r.state.add(v, w, d, labelState.String(s))
	}
	if ns, err := p.NormalizerStats(id, timeout); err != nil {
		r.errors++
	} else {
		r.normalizer(&ns.Stream, w, d)
		r.lost.add(float64(ns.StreamHistoryLost), w, d)
		if e := ns.StreamEngine; e.Contradicted > 0 {
			r.contradictions.add(float64(e.Contradicted), w, d, labelEngine.String(e.Choice))
		}
	}
}

func (r *readings) listener(ls *listener.Stats, w, d attribute.KeyValue) {
	r.batches.add(float64(ls.Delivered), w, d)
	r.gaps.add(float64(ls.Gaps), w, d)
	r.recoveries.add(float64(ls.Recoveries), w, d)
	for why, n := range ls.BadFrames {
		if strings.HasPrefix(why, "socket:") {
			why = "socket_error" // the error text varies: not a label
		}
		r.dropped.add(float64(n), w, d, labelReason.String(why))
	}
	for result, n := range ls.Replays {
		r.replays.add(float64(n), w, d, labelResult.String(result))
	}
	for reason, n := range ls.Resyncs {
		r.resyncs.add(float64(n), w, d, labelReason.String(reason))
	}
}

// normalizer adds a stream's event outcomes: accepted by kind; rejected by
// reason (the normalizer does not keep the kind of what it rejects).
func (r *readings) normalizer(s *normalizer.Stats, w, d attribute.KeyValue) {
	for k, n := range s.Accepted {
		if n > 0 {
			r.events.add(float64(n), w, d, labelKind.String(messages.EventKind(k).String()),
				labelOutcome.String("accepted"), labelReason.String(""))
		}
	}
	for reason, n := range s.Rejected {
		if n > 0 {
			r.events.add(float64(n), w, d, labelKind.String(""), labelOutcome.String("rejected"),
				labelReason.String(messages.Reason(reason).String()))
		}
	}
	for h, n := range s.DroppedHints {
		if n > 0 {
			r.hints.add(float64(n), w, d, labelReason.String(wire.Hint(h).Reason()))
		}
	}
}

// StateOf is a stream's state as /workers and the worker-state metric
// report it (api.StreamState's values): recovering while its listener
// recovers (listener.Stats.Recovering: a replay runs or the connection is
// down) and before its first batch, else the coalescer's exact or degraded.
func StateOf(st coalescer.StreamState, recovering bool) string {
	switch {
	case recovering:
		return stateRecovering
	case st == coalescer.StateExact:
		return stateExact
	case st == coalescer.StateDegraded:
		return stateDegraded
	}
	return stateRecovering
}
