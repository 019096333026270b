package engine

import (
	"cmp"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/wire"
)

// trtStart is a TensorRT-LLM publisher's first seq: its start time in
// nanoseconds (2026-12-01).
const trtStart = 1_796_083_200_000_000_000

type batch struct {
	seq    uint64
	layout wire.Layout
}

// Auto names the engine each stream's batches show, and says why.
func TestDetectorAuto(t *testing.T) {
	for _, c := range []struct {
		name     string
		batches  []batch
		want     string // Detected
		evidence string // a part of Evidence
	}{
		{"nothing yet", nil, "", ""},
		{"vLLM map events", []batch{{0, wire.LayoutMap}, {1, wire.LayoutMap}}, "vllm", "map-encoded events"},
		{"SGLang metadata at 7", []batch{{0, wire.LayoutPositional | wire.LayoutMetadata}}, "sglang", "an SGLang metadata map"},
		{"SGLang map events with metadata", []batch{{3, wire.LayoutMap}, {4, wire.LayoutMap | wire.LayoutMetadata}}, "sglang", "seqs counted from 0"},
		{"TensorRT-LLM timestamps", []batch{{trtStart, 0}, {trtStart + 1, wire.LayoutMap}}, "trtllm", "nanosecond-timestamp seqs (first 1796083200000000000)"},
		{"positional without metadata: vLLM ≤ 0.25 or SGLang", []batch{{0, wire.LayoutPositional}}, "", "positional events"},
	} {
		d := NewDetector("")
		for _, b := range c.batches {
			if d.Observe(b.seq, b.layout) {
				t.Errorf("%s: auto is never contradicted", c.name)
			}
		}
		got := d.Detection()
		if got.Choice != Auto || got.Detected != c.want || !strings.Contains(got.Evidence, c.evidence) || got.Warning() != "" {
			t.Errorf("%s: %+v, want detected %q with evidence %q", c.name, got, c.want, c.evidence)
		}
		if want := cmp.Or(c.want, Auto); d.Engine() != want {
			t.Errorf("%s: decodes with %q, want %q", c.name, d.Engine(), want)
		}
	}
}

// An explicit engine is followed even when the stream contradicts it, and
// the contradiction is reported once (the caller's warning) and counted
// per batch.
func TestDetectorContradiction(t *testing.T) {
	d := NewDetector("vllm")
	if d.Observe(trtStart, wire.LayoutMap) != true {
		t.Fatal("the first contradicting batch must be reported")
	}
	if d.Observe(trtStart+1, wire.LayoutMap) {
		t.Fatal("a contradiction is reported once per stream")
	}
	got := d.Detection()
	if d.Engine() != "vllm" || got.Contradicted != 2 || got.Detected != "trtllm" || !strings.Contains(got.Conflict, "nanosecond-timestamp seqs") {
		t.Fatalf("%+v (engine %s)", got, d.Engine())
	}
	if w := got.Warning(); !strings.Contains(w, "registered as engine vllm, but the stream shows nanosecond-timestamp seqs") || !strings.Contains(w, "as trtllm's does") {
		t.Errorf("warning %q", w)
	}
	for _, c := range []struct {
		choice string
		b      batch
		bad    bool
	}{
		{"vllm", batch{0, wire.LayoutMap}, false},
		{"vllm", batch{0, wire.LayoutPositional}, false}, // vLLM ≤ 0.25
		{"vllm", batch{0, wire.LayoutPositional | wire.LayoutMetadata}, true},
		{"sglang", batch{0, wire.LayoutMap}, false}, // newer SGLang
		{"sglang", batch{trtStart, wire.LayoutMap}, true},
		{"trtllm", batch{trtStart, wire.LayoutMap}, false},
		{"trtllm", batch{5, wire.LayoutMap}, false}, // its in-engine publisher counts from 0
		{"trtllm", batch{trtStart, wire.LayoutPositional}, true},
	} {
		if got := NewDetector(c.choice).Observe(c.b.seq, c.b.layout); got != c.bad {
			t.Errorf("%s on %+v: contradiction %v, want %v", c.choice, c.b, got, c.bad)
		}
	}
}

func TestChoose(t *testing.T) {
	for _, name := range []string{"", Auto, "vllm", "sglang", "trtllm"} {
		if _, err := Choose(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	if a, _ := Choose(""); a.Name() != Auto || !a.Stream().SeqStartDetected {
		t.Error("the default choice is auto, whose seq start is read from the first seq")
	}
	if _, err := Choose("llamacpp"); err == nil || !strings.Contains(err.Error(), "auto, sglang, trtllm, vllm") {
		t.Errorf("unknown engine: %v", err)
	}
	if IsTimestampSeq(1<<40) || !IsTimestampSeq(trtStart) {
		t.Error("a count is not a timestamp; TensorRT-LLM's start is")
	}
}
