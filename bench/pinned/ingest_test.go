package pinned

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The whole ingest mode at a small rate: 2 replay publishers and kvrouter
// serve, pinned when taskset and two cores are there; the router applies
// blocks, counted from its metrics, and the table prints.
func TestRunIngestEndToEnd(t *testing.T) {
	bin := buildRouter(t)
	cfg := DefaultIngestConfig()
	cfg.KVRouter = bin
	cfg.Rates, cfg.Publishers, cfg.PreEncode, cfg.Capacity = []float64{20_000}, 2, 5000, 1024
	cfg.Warmup, cfg.Duration = 500*time.Millisecond, time.Second
	cfg.Pin = runtime.NumCPU() >= 2
	cfg.Nice = 1 // a lower priority needs no privilege; the table names it
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := RunIngest(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.Points) != 1 {
		t.Fatalf("%d points, want 1", len(rep.Points))
	}
	p := rep.Points[0]
	if p.Sent <= 0 || p.Applied <= 0 || p.RouterCPU <= 0 || p.Wall < cfg.Duration.Seconds() {
		t.Errorf("point %+v: want blocks sent, applied by the router and its CPU time over the window\n%s", p, progress.String())
	}
	if p.Gaps < 0 || p.Replays < 0 || p.Resyncs < 0 || p.Dropped < 0 {
		t.Errorf("point %+v: the router's counters were not read", p)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"nice 1;", "applied blocks/s", "cpu-s per M blocks", "kept up", "20k"} {
		if !strings.Contains(table.String(), col) {
			t.Errorf("table has no %q:\n%s", col, table.String())
		}
	}
}

// A point's derived figures: CPU per million blocks, blocks per CPU-second
// and whether the router kept up.
func TestIngestPointFigures(t *testing.T) {
	p := IngestPoint{Sent: 1e6, Applied: 1e6, RouterCPU: 2.5, Wall: 5}
	if got := p.cpuPerMillion(); got != 0.5 {
		t.Errorf("cpu per million = %v, want 0.5", got)
	}
	if got := p.perCPUSecond(); got != 2e6 {
		t.Errorf("blocks per cpu-second = %v, want 2e6", got)
	}
	if got := p.keptUp(); got != "yes" {
		t.Errorf("kept up = %q, want yes", got)
	}
	behind := p
	behind.Applied = 0.9e6
	gap := p
	gap.Gaps = 1
	unknown := p
	unknown.Applied, unknown.Gaps = -1, -1
	for name, c := range map[string]struct {
		p    IngestPoint
		want string
	}{"behind": {behind, "no"}, "gap": {gap, "no"}, "unknown": {unknown, "?"}} {
		if got := c.p.keptUp(); got != c.want {
			t.Errorf("%s: kept up = %q, want %q", name, got, c.want)
		}
	}
	if unknown.cpuPerMillion() != -1 || unknown.perCPUSecond() != -1 {
		t.Errorf("unknown applied blocks: cpu figures %v, %v, want -1", unknown.cpuPerMillion(), unknown.perCPUSecond())
	}
}

// A nice value outside -20..19 is refused before anything starts.
func TestIngestConfigRefusesABadNice(t *testing.T) {
	for _, n := range []int{-21, 20} {
		cfg := DefaultIngestConfig()
		cfg.KVRouter, cfg.Nice = "kvrouter", n
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "nice") {
			t.Errorf("nice %d: Validate() = %v, want an error naming the nice value", n, err)
		}
	}
	cfg := DefaultIngestConfig()
	cfg.KVRouter, cfg.Nice = "kvrouter", -15
	if err := cfg.Validate(); err != nil {
		t.Errorf("nice -15: %v", err)
	}
}
