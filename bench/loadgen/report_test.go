package loadgen

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func sampleReport() *Report {
	return &Report{
		Mode:    "quick",
		Machine: Machine{CPUs: 2, CPUModel: "AMD EPYC", GoVersion: "go1.26.8", Platform: "linux/amd64", Date: "2026-11-29"},
		Config:  ReportConfig{Traces: []string{"conversation"}, TokensPerBlock: 16, Shards: []int{1}},
		Ingest: []IngestResult{{Trace: "conversation", Workers: 8, Shards: 1, Requests: 12031, StoredBlocks: 241172,
			BlocksPerSec: 1.5e6, EventsPerSec: 4.2e5, Lag: Latency{P50: 900, P99: 2500, P999: 4000}, Valid: true}},
		Sweep: []SweepPoint{
			{Transport: TransportInProcess, Workers: 16, Shards: 1, Offered: 1000, Achieved: 1000, Latency: Latency{N: 1000, P50: 17.4, P99: 116.5, P999: 390}, Valid: true},
			{Transport: TransportHTTP, Workers: 16, Shards: 1, Offered: 10000, Achieved: 8300, Latency: Latency{N: 8300, P50: 6900, P99: 20598, P999: 21000},
				Saturated: true, Valid: false, Invalid: "lag growing"},
		},
		Memory:  []MemoryResult{{Trace: "conversation", Workers: 4, Shards: 1, Entries: 32768, HeapBytes: 10 << 20, FixedBytes: 5 << 20, BytesPerEntry: 160}},
		Quality: []QualityRow{{Trace: "conversation", Workers: 4, Shards: 1, Policy: NameKVRouter, Requests: 2000, HitRate: 0.199, OfBound: 0.95, RequestCoV: 0.048, Route: Latency{N: 2000, P99: 35}, Valid: true}},
		Notes:   []string{"a note"},
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"kvrouter-bench (quick) — 2 CPUs, AMD EPYC, go1.26.8, 2026-11-29",
		"1.50M", "420.0k", // ingest rates
		"116.5", "saturated; INVALID: lag growing",
		"32768", "160", // memory
		"19.9%", "95.0%", "0.048", "35.0", // quality
		"note: a note",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// four sections, each a title, a header and its rows, right-aligned
	// to the same width
	sections := strings.Split(strings.SplitN(out, "\nnote:", 2)[0], "\n\n")[1:]
	if len(sections) != 4 {
		t.Fatalf("%d sections, want 4:\n%s", len(sections), out)
	}
	for _, s := range sections {
		lines := strings.Split(strings.TrimSpace(s), "\n")[1:]
		for _, l := range lines[1:] {
			if len(l) != len(lines[0]) && len([]rune(l)) != len([]rune(lines[0])) {
				t.Errorf("row not aligned with its header:\n%s\n%s", lines[0], l)
			}
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	rep := sampleReport()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Sweep[1].Invalid != "lag growing" || back.Memory[0].BytesPerEntry != 160 || back.Quality[0].Route.P99 != 35 {
		t.Errorf("round trip lost data: %+v", back)
	}
	if !strings.Contains(b.String(), `"p999_us"`) || !strings.Contains(b.String(), `"of_clairvoyant"`) {
		t.Errorf("JSON field names changed:\n%s", b.String())
	}
}

func TestSI(t *testing.T) {
	for in, want := range map[float64]string{950: "950", 1500: "1.5k", 2.25e6: "2.25M"} {
		if got := si(in); got != want {
			t.Errorf("si(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestCPUModel(t *testing.T) {
	info := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := CPUModel(info); got != "AMD EPYC 7B13" {
		t.Errorf("CPUModel = %q", got)
	}
	if got := CPUModel("processor : 0\n"); got != "unknown" {
		t.Errorf("CPUModel without a model = %q", got)
	}
}
