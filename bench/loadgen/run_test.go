package loadgen

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
)

// smallConfig is a run on 4 workers over the conversation trace's first
// requests, sweeping rates (300 ms points, 8 clients) on them.
func smallConfig(requests int, rates ...float64) Config {
	cfg := QuickConfig()
	cfg.Traces, cfg.Requests, cfg.Workers, cfg.SweepWorkers = []string{ConversationTrace}, requests, []int{4}, []int{4}
	cfg.Rates, cfg.PointDuration, cfg.Clients = rates, 300*time.Millisecond, 8
	return cfg
}

// runByPolicy runs cfg and returns the report and its quality rows by
// policy, each of which must have answered every request.
func runByPolicy(t *testing.T, cfg Config) (*Report, map[string]QualityRow) {
	t.Helper()
	rep, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hit := map[string]QualityRow{}
	for _, q := range rep.Quality {
		hit[q.Policy] = q
		if q.Requests != cfg.Requests {
			t.Errorf("%s answered %d of %d requests", q.Policy, q.Requests, cfg.Requests)
		}
	}
	return rep, hit
}

// TestRunEndToEnd runs the harness small: 400 conversation requests on 4
// simulated workers through the real pipeline (an index of 2 shards) and
// route path, a short ingest phase and a two-point sweep over both
// transports.
func TestRunEndToEnd(t *testing.T) {
	cfg := smallConfig(400, 200, 400)
	cfg.Shards, cfg.Hosts = []int{2}, []int{1}
	cfg.IngestWorkers, cfg.IngestPasses = 2, 1
	cfg.MemProfile = filepath.Join(t.TempDir(), "heap")
	rep, hit := runByPolicy(t, cfg)
	kv, random, bound := hit[NameKVRouter], hit[NameRandom], hit[NameClairvoyant]
	if !(bound.HitRate >= kv.HitRate && kv.HitRate > random.HitRate) {
		t.Errorf("hit rates: clairvoyant %.3f, kvrouter %.3f, random %.3f", bound.HitRate, kv.HitRate, random.HitRate)
	}
	if !kv.Valid || kv.Route.N != 400 || kv.Lag.N == 0 {
		t.Errorf("kvrouter replay: %+v", kv)
	}
	if len(rep.Ingest) != 1 || rep.Ingest[0].StoredBlocks == 0 || rep.Ingest[0].BlocksPerSec <= 0 {
		t.Errorf("ingest: %+v", rep.Ingest)
	}
	// each transport sweeps the rates in order until one saturates (on a
	// busy machine even 400/s over 300 ms may: a 15 ms stall is enough)
	byTransport := map[string][]SweepPoint{}
	for _, p := range rep.Sweep {
		byTransport[p.Transport] = append(byTransport[p.Transport], p)
	}
	for _, tr := range cfg.Transports {
		pts := byTransport[tr]
		if len(pts) == 0 || len(pts) > len(cfg.Rates) {
			t.Fatalf("%s: %d sweep points, want 1..%d", tr, len(pts), len(cfg.Rates))
		}
		for i, p := range pts {
			if p.Offered != cfg.Rates[i] || (i < len(pts)-1 && p.Saturated) || (len(pts) < len(cfg.Rates) && !pts[len(pts)-1].Saturated) {
				t.Errorf("%s point %d: offered %v, saturated %v: the sweep must go up the rates and stop only at a saturated one", tr, i, p.Offered, p.Saturated)
			}
		}
	}
	for _, p := range rep.Sweep {
		if p.Shards != 2 || p.Dropped != 0 {
			t.Errorf("sweep point %s %v/s: %d shards, %d serves dropped", p.Transport, p.Offered, p.Shards, p.Dropped)
		}
		if p.Errors != 0 || p.Latency.N != p.Requests {
			t.Errorf("sweep point %s %v/s: %d errors, %d of %d answered", p.Transport, p.Offered, p.Errors, p.Latency.N, p.Requests)
		}
	}
	if len(rep.Memory) != 1 || rep.Memory[0].Entries == 0 || rep.Memory[0].HeapBytes <= 0 {
		t.Errorf("memory: %+v", rep.Memory)
	}
	checkHeapProfiles(t, cfg.MemProfile, 4)
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not parse: %v", err)
	}
	if len(back.Quality) != len(rep.Quality) {
		t.Errorf("JSON report has %d quality rows, want %d", len(back.Quality), len(rep.Quality))
	}
	files, err := WritePlots(rep, t.TempDir())
	if err != nil || len(files) != 2 {
		t.Errorf("plots %v: %v", files, err)
	}
}

func TestPolicyName(t *testing.T) {
	one := &runner{cfg: QuickConfig()}
	sweep := &runner{cfg: QuickConfig()}
	sweep.cfg.OverlapWeights = []float64{1, 0.25}
	for _, c := range []struct {
		r    *runner
		rs   replaySpec
		want string
	}{
		{one, replaySpec{predict: true, sessions: true, weight: routing.DefaultOverlapWeight}, "kvrouter"},
		{one, replaySpec{predict: true, sessions: false, weight: routing.DefaultOverlapWeight}, "kvrouter/no-session"},
		{one, replaySpec{predict: true, sessions: true, weight: 2}, "kvrouter w=2"},
		{one, replaySpec{sessions: true, predict: false, weight: routing.DefaultOverlapWeight}, "kvrouter/no-predict"},
		{sweep, replaySpec{predict: true, sessions: true, weight: 1}, "kvrouter w=1"},
		{sweep, replaySpec{predict: true, sessions: false, weight: 0.25}, "kvrouter/no-session w=0.25"},
	} {
		if got := c.r.policyName(c.rs); got != c.want {
			t.Errorf("policyName(%+v) = %q, want %q", c.rs, got, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"zero shards":     func(c *Config) { c.Shards = []int{1, 0} },
		"no weight":       func(c *Config) { c.OverlapWeights = nil },
		"negative credit": func(c *Config) { c.SessionCredit = -1 },
		"unknown feed":    func(c *Config) { c.Feed = "sync" },
		"no trace":        func(c *Config) { c.Traces = nil },
		"zero workers":    func(c *Config) { c.Workers = []int{0} },
		"bad transport":   func(c *Config) { c.Transports = []string{"grpc"} },
		"zero rate":       func(c *Config) { c.Rates = []float64{0} },
	} {
		c := QuickConfig()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, c := range []Config{QuickConfig(), FullConfig()} {
		if err := c.Validate(); err != nil {
			t.Errorf("%s preset: %v", c.Mode, err)
		}
	}
}

// checkHeapProfiles checks the memory measure's four heap profiles of a
// replay on workers: each is a gzipped heap profile (its sample types
// named; which sites it holds depends on MemProfileRate, left as is here).
func checkHeapProfiles(t *testing.T, prefix string, workers int) {
	t.Helper()
	for _, role := range []string{"measured", "empty"} {
		for _, moment := range []string{"before", "after"} {
			path := memProfilePath(prefix, workers, role, moment)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("heap profile: %v", err)
				continue
			}
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Errorf("%s is not gzipped: %v", path, err)
				continue
			}
			body, err := io.ReadAll(zr)
			if err != nil {
				t.Errorf("%s: %v", path, err)
			}
			if !bytes.Contains(body, []byte("inuse_space")) {
				t.Errorf("%s is not a heap profile", path)
			}
		}
	}
}
