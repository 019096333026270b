package pinned

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/bench/loadgen"
)

// The table has one row per point with the floor, kvrouter and their
// ratio, and a header saying how processes were placed.
func TestWriteTable(t *testing.T) {
	r := &Report{Config: QuickConfig(), CPUs: 2, LoadBefore: "1.5", LoadAfter: "2.0", Fill: []float64{0.93},
		Points: []Point{{Ingest: 100_000, Rate: 10_000, RouterIngest: 98_700,
			Floor: Stats{Scheduled: 10, OK: 10, Latency: lat(100, 200, 400), Throughput: 10_000,
				CPU: CPU{ServerPerOK: 40, Generator: 0.5, Engines: 0.3}},
			Router: Stats{Scheduled: 10, OK: 9, Errors: 1, Latency: lat(150, 3000, 25000), Throughput: 9_990,
				CPU: CPU{ServerPerOK: 92, Generator: 0.6, Engines: 0.35}}}}}
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"router (and floor) on cpu 0; generator and 2 engines on cpu 1 (taskset)", "generator, router and floor at nice 0, engines at nice 19", "load average 1.5 → 2.0",
		"index fill at start 93%", "100k", "10k", "100µs", "3.00ms", "25.00ms", "1.5×", "15×", "62×", "0/1", "98.7k", "9.99k", "40µs/92µs", "2.3×", "80%/95%"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if row := strings.TrimSpace(lines[len(lines)-1]); !strings.HasSuffix(row, " kvrouter") {
		t.Errorf("the point with 1 failure in 10 is not marked saturated on kvrouter's side: %q", row)
	}
	r.Pinning = "UNPINNED: taskset (util-linux) not found"
	b.Reset()
	_ = r.WriteTable(&b)
	if !strings.Contains(b.String(), "UNPINNED") {
		t.Errorf("an unpinned run does not say so:\n%s", b.String())
	}
}

func lat(p50, p99, p999 float64) loadgen.Latency {
	return loadgen.Latency{P50: p50, P99: p99, P999: p999}
}
