package engine

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/kvrouter/kvrouter/messages/wire"
)

// Evidence is a set of things a stream showed about the engine publishing
// it: its seqs and its events' layouts (README.md, "Choosing the engine").
type Evidence uint8

// What a stream can show.
const (
	// EvidenceTimestampSeq: a seq that is a nanosecond timestamp
	// (IsTimestampSeq): TensorRT-LLM's.
	EvidenceTimestampSeq Evidence = 1 << iota
	// EvidenceCountSeq: a seq counted from 0 (vLLM, SGLang).
	EvidenceCountSeq
	// EvidenceMapEvents: map-encoded events (wire.LayoutMap).
	EvidenceMapEvents
	// EvidencePositional: positional events (wire.LayoutPositional).
	EvidencePositional
	// EvidenceMetadata: SGLang's metadata map (wire.LayoutMetadata).
	EvidenceMetadata
)

var evidenceText = [...]string{
	"nanosecond-timestamp seqs (first %d)", "seqs counted from 0", "map-encoded events", "positional events",
	"an SGLang metadata map",
}

// evidenceOf is what one batch shows: its seq and its events' layouts.
func evidenceOf(seq uint64, l wire.Layout) Evidence {
	e := EvidenceCountSeq
	if IsTimestampSeq(seq) {
		e = EvidenceTimestampSeq
	}
	for _, m := range []struct {
		l wire.Layout
		e Evidence
	}{{wire.LayoutMap, EvidenceMapEvents}, {wire.LayoutPositional, EvidencePositional}, {wire.LayoutMetadata, EvidenceMetadata}} {
		if l.Has(m.l) {
			e |= m.e
		}
	}
	return e
}

// describe lists the evidence in e, the timestamp seq shown as ts.
func (e Evidence) describe(ts uint64) string {
	var parts []string
	for i, t := range evidenceText {
		if e&(1<<i) == 0 {
			continue
		}
		if Evidence(1<<i) == EvidenceTimestampSeq {
			t = fmt.Sprintf(t, ts)
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, ", ")
}

// detect names the one registered engine that shows some of seen and
// never shows any of it ("" when none or several do).
func detect(seen Evidence) string {
	found := ""
	for _, name := range Names() {
		shows, never := registry[name].Evidence()
		if seen&shows == 0 || seen&never != 0 {
			continue
		}
		if found != "" {
			return ""
		}
		found = name
	}
	return found
}

// Detector follows what one stream shows about its engine, against the
// registration's choice. Plain data: the normalizer keeps one per stream.
type Detector struct {
	choice       string
	seen         Evidence
	detected     string // detect(seen), kept as seen grows (not per batch)
	ts           uint64 // the first timestamp seq seen
	conflict     Evidence
	contradicted uint64
}

// NewDetector returns the detector of a stream registered with choice (""
// is Auto).
func NewDetector(choice string) *Detector {
	if choice == "" {
		choice = Auto
	}
	return &Detector{choice: choice}
}

// Choice is the registration's engine choice.
func (d *Detector) Choice() string { return d.choice }

// Observe records one decoded batch: its seq and its events' layouts. It
// reports whether the batch is the first to contradict an explicit choice,
// for the caller to warn once per stream.
func (d *Detector) Observe(seq uint64, l wire.Layout) bool {
	e := evidenceOf(seq, l)
	if e&EvidenceTimestampSeq != 0 && d.seen&EvidenceTimestampSeq == 0 {
		d.ts = seq
	}
	if e&^d.seen != 0 {
		d.seen |= e
		d.detected = detect(d.seen)
	}
	a, ok := registry[d.choice]
	if !ok {
		return false // Auto, or a name the decoder refuses (counted there)
	}
	if _, never := a.Evidence(); e&never != 0 {
		d.conflict |= e & never
		d.contradicted++
		return d.contradicted == 1
	}
	return false
}

// Engine names the adapter for the stream's next batch: an explicit
// choice, even contradicted (the warning says so); else the detected
// engine; else Auto.
func (d *Detector) Engine() string {
	if d.choice != Auto {
		return d.choice
	}
	return cmp.Or(d.detected, Auto)
}

// Detection is a stream's engine as /workers shows it.
type Detection struct {
	// Choice is the registration's: auto or an engine name.
	Choice string
	// Detected is the engine the evidence names ("" before the first batch,
	// or while it fits several engines).
	Detected string
	// Evidence lists what the stream showed, for people.
	Evidence string
	// Contradicted counts the batches that showed what the chosen engine
	// never sends; Conflict says what.
	Contradicted uint64
	Conflict     string
}

// Detection returns what the detector knows.
func (d *Detector) Detection() Detection {
	return Detection{Choice: d.choice, Detected: d.detected, Evidence: d.seen.describe(d.ts),
		Contradicted: d.contradicted, Conflict: d.conflict.describe(d.ts)}
}

// Warning is the contradiction as a /workers warning ("" when none).
func (d Detection) Warning() string {
	if d.Contradicted == 0 {
		return ""
	}
	looks := d.Detected + "'s"
	if d.Detected == "" {
		looks = "another engine's"
	}
	return fmt.Sprintf("registered as engine %s, but the stream shows %s, as %s does: %d batches decoded as %s regardless",
		d.Choice, d.Conflict, looks, d.Contradicted, d.Choice)
}
