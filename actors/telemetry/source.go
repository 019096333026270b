package telemetry

import (
	"time"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/messages"
)

// Pipeline is what the metrics read from one ingest pipeline at a scrape:
// the actors' own counters. *pipeline.Pipeline implements it.
type Pipeline interface {
	// Status lists the streams and their states.
	Status(timeout time.Duration) (*coalescer.Status, error)
	ListenerStats(s messages.StreamID, timeout time.Duration) (*listener.Stats, error)
	// SharedSocketStats is each socket shared by topic's whole Stats, by
	// endpoint (none: an empty map).
	SharedSocketStats(timeout time.Duration) (map[string]*listener.Stats, error)
	NormalizerStats(s messages.StreamID, timeout time.Duration) (*normalizer.PoolStats, error)
	IndexStats(timeout time.Duration) (*indexer.Stats, error)
	SessionStats(timeout time.Duration) (*sessions.Stats, error)
}

// Source lists the pipelines to read at each scrape (kvrouter serve: one
// per namespace). Figures of the same stream or shard in several pipelines
// are summed.
type Source interface {
	Pipelines() []Pipeline
}

// Pipelines is a fixed list of pipelines as a Source.
type Pipelines []Pipeline

// Pipelines implements Source.
func (p Pipelines) Pipelines() []Pipeline { return p }
