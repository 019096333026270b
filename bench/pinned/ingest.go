package pinned

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
)

// IngestConfig shapes a pinned ingest run (`kvrouter-bench
// pinned-ingest`): the router alone on RouterCPU, Publishers replay
// publishers on LoadCPU, one point per offered rate. DefaultIngestConfig
// and QuickIngestConfig are the presets.
type IngestConfig struct {
	// KVRouter is the kvrouter binary (serve and sim run from it).
	KVRouter string
	// Rates are the offered rates, stored blocks/s of all publishers
	// together; 0 offers flat out (each publisher as fast as it sends).
	Rates []float64
	// Publishers is the number of `kvrouter sim --pre-encode` processes;
	// publisher i starts i/Publishers into the trace.
	Publishers int
	// PreEncode is the stored blocks each publisher encodes before it
	// publishes (one pass of its loop, ending in AllBlocksCleared).
	PreEncode int
	// Capacity is each publisher's cache while it records, in blocks.
	Capacity int
	// HWM is each publisher's PUB high-water mark, in messages.
	HWM int
	// Warmup runs at the point's rate, unmeasured, before Duration.
	Warmup, Duration time.Duration
	// Trace, TokensPerBlock and Seed: the prompts the publishers record.
	Trace          string
	TokensPerBlock int
	Seed           uint64
	// Shards is serve's --shards.
	Shards int
	// RouterCPU runs the router; LoadCPU the publishers. Pin false runs
	// unpinned.
	RouterCPU, LoadCPU int
	Pin                bool
	// Nice is the nice value of the harness, the router and the
	// publishers (0: left as is; below 0 needs CAP_SYS_NICE): on a machine
	// shared with other jobs it gives the router its core back (setNice
	// says why the session's autogroup is set too).
	Nice int
	// RouterProfile, when set, is where a CPU profile of the router is
	// written, over the measured part of the point at ProfileRate.
	RouterProfile string
	ProfileRate   float64
	// Progress, when set, gets a line per step.
	Progress io.Writer
}

// DefaultIngestConfig steps the offered rate from 250k blocks/s to flat
// out: 4 publishers, 200,000 pre-encoded blocks each, 5 s points after 2 s
// of warm-up.
func DefaultIngestConfig() IngestConfig {
	return IngestConfig{
		Rates: []float64{250_000, 500_000, 1_000_000, 1_500_000, 2_000_000, 0}, Publishers: 4, PreEncode: 200_000,
		Capacity: 65536, HWM: 100_000, Warmup: 2 * time.Second, Duration: 5 * time.Second,
		Trace: "builtin:conversation", TokensPerBlock: 16, Seed: 1, Shards: 1, RouterCPU: 0, LoadCPU: 1, Pin: true,
	}
}

// QuickIngestConfig is a smoke run: one 2 s point at 250k blocks/s from 2
// publishers of 50,000 blocks each.
func QuickIngestConfig() IngestConfig {
	c := DefaultIngestConfig()
	c.Rates, c.Publishers, c.PreEncode, c.Warmup, c.Duration = []float64{250_000}, 2, 50_000, time.Second, 2*time.Second
	return c
}

// Validate reports the first unusable field.
func (c IngestConfig) Validate() error {
	switch {
	case c.KVRouter == "":
		return errors.New("pinned ingest: no kvrouter binary")
	case len(c.Rates) == 0:
		return errors.New("pinned ingest: no offered rates")
	case c.Publishers <= 0 || c.PreEncode <= 0 || c.Capacity <= 0 || c.HWM < 0 || c.TokensPerBlock <= 0 || c.Shards <= 0:
		return errors.New("pinned ingest: publishers, pre-encoded blocks, capacity, tokens per block and shards must be positive, hwm not negative")
	case c.Duration <= 0 || c.Warmup < 0:
		return errors.New("pinned ingest: duration must be positive, warm-up not negative")
	case c.Nice < -20 || c.Nice > 19:
		return fmt.Errorf("pinned ingest: nice %d: want -20..19", c.Nice)
	case c.RouterCPU < 0 || c.LoadCPU < 0 || c.Pin && c.RouterCPU == c.LoadCPU:
		return fmt.Errorf("pinned ingest: router cpu %d and load cpu %d must be distinct and not negative", c.RouterCPU, c.LoadCPU)
	}
	for _, r := range c.Rates {
		if r < 0 {
			return fmt.Errorf("pinned ingest: rate %v must not be negative", r)
		}
	}
	return nil
}

// IngestPoint is one offered rate, measured over Duration after the warm-up.
type IngestPoint struct {
	Offered float64 // blocks/s asked of the publishers (0: flat out)
	// Sent is the stored blocks/s the publishers handed their PUB sockets;
	// Applied the blocks/s of stored events the router's index applied
	// (kvrouter_index_stored_blocks_total).
	Sent, Applied float64
	// RouterCPU is the router's CPU seconds (user + system, every thread,
	// from /proc) over the window; Wall the window.
	RouterCPU, Wall float64
	// Gaps, Replays, Resyncs and Dropped (messages the listeners dropped
	// before sequencing them, plus batches not applied whole) counted by
	// the router over the window; -1 when its /metrics did not answer.
	Gaps, Replays, Resyncs, Dropped float64
}

// IngestReport is a pinned ingest run.
type IngestReport struct {
	Config  IngestConfig `json:"-"`
	Pinning string
	// LoadBefore and LoadAfter are /proc/loadavg's 1-minute figure.
	LoadBefore, LoadAfter string
	CPUs                  int
	Points                []IngestPoint
}

// RunIngest measures the router's ingest at every offered rate of cfg: per
// point a fresh router and fresh publishers.
func RunIngest(ctx context.Context, cfg IngestConfig) (*IngestReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	prompts, err := tracePrompts(cfg.Trace, cfg.TokensPerBlock, cfg.Seed)
	if err != nil {
		return nil, err
	}
	pin, note := newPinning(cfg.Pin)
	rep := &IngestReport{Config: cfg, Pinning: note, LoadBefore: loadAverage(), CPUs: runtime.NumCPU()}
	restore, err := setNice(cfg.Nice)
	defer restore()
	if err != nil {
		return nil, err
	}
	r := &ingestRunner{cfg: cfg, pin: pin, prompts: prompts}
	for _, rate := range cfg.Rates {
		p, err := r.point(ctx, rate)
		if err != nil {
			return nil, err
		}
		rep.Points = append(rep.Points, p)
	}
	rep.LoadAfter = loadAverage()
	return rep, nil
}

// tracePrompts counts the trace's prompts (publisher i skips i/n of them).
func tracePrompts(trace string, tpb int, seed uint64) (int, error) {
	d, err := simengine.OpenTrace(trace, simengine.TraceConfig{TokensPerBlock: tpb, Seed: seed})
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		if _, err := d.Next(); errors.Is(err, io.EOF) {
			return n, nil
		} else if err != nil {
			return 0, err
		}
		n++
	}
}

type ingestRunner struct {
	cfg     IngestConfig
	pin     pinning
	prompts int
}

func (r *ingestRunner) progress(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "pinned ingest: "+format+"\n", a...)
	}
}

// startPublishers starts the replay publishers offering rate blocks/s
// between them (0: flat out); their sent= status fields count.
func (r *ingestRunner) startPublishers(rate float64) (*engines, error) {
	c := r.cfg
	addrs, err := freeAddrs(2 * c.Publishers)
	if err != nil {
		return nil, err
	}
	e := &engines{stored: make([]atomic.Uint64, c.Publishers)}
	for i := range c.Publishers {
		pub, rep := "tcp://"+addrs[2*i], "tcp://"+addrs[2*i+1]
		tpb := strconv.Itoa(c.TokensPerBlock)
		argv := r.pin.argv(c.LoadCPU, []string{c.KVRouter, "sim", "--driver", "trace", "--trace", c.Trace,
			"--tokens-per-block", tpb, "--block-size", tpb, "--seed", strconv.FormatUint(c.Seed, 10),
			"--capacity", strconv.Itoa(c.Capacity), "--loop", "--skip", strconv.Itoa(i * r.prompts / c.Publishers),
			"--pre-encode", strconv.Itoa(c.PreEncode), "--block-rate", strconv.FormatFloat(rate/float64(c.Publishers), 'f', -1, 64),
			"--hwm", strconv.Itoa(c.HWM), "--endpoint", pub, "--replay-endpoint", rep, "--status", "100ms"})
		if err := e.start(fmt.Sprintf("publisher %d", i+1), argv, i, "sent"); err != nil {
			e.stop()
			return nil, err
		}
		e.pubs, e.replay = append(e.pubs, pub), append(e.replay, rep)
	}
	return e, nil
}

// point measures one offered rate: publishers up (recorded, publishing),
// then the router, the warm-up, and the window.
func (r *ingestRunner) point(ctx context.Context, rate float64) (IngestPoint, error) {
	c := r.cfg
	pt := IngestPoint{Offered: rate}
	r.progress("%s blocks/s: %d publishers pre-encoding %d blocks each", offered(rate), c.Publishers, c.PreEncode)
	pubs, err := r.startPublishers(rate)
	if err != nil {
		return pt, err
	}
	defer pubs.stop()
	if err := pubs.waitUp(ctx); err != nil {
		return pt, err
	}
	addrs, err := freeAddrs(2)
	if err != nil {
		return pt, err
	}
	base := "http://" + addrs[0]
	argv := []string{c.KVRouter, "serve", "--http", addrs[0], "--block-size", strconv.Itoa(c.TokensPerBlock),
		"--shards", strconv.Itoa(c.Shards)}
	profiled := c.RouterProfile != "" && rate == c.ProfileRate
	if profiled {
		argv = append(argv, "--pprof-listen", addrs[1])
	}
	for i := range pubs.pubs {
		argv = append(argv, "--worker", fmt.Sprintf("%d=%s,replay=%s", i+1, pubs.pubs[i], pubs.replay[i]))
	}
	router, err := startProc("kvrouter serve", r.pin.argv(c.RouterCPU, argv), nil)
	if err != nil {
		return pt, err
	}
	defer router.stop()
	if err := waitFor(ctx, router, 30*time.Second, "readiness", func() (bool, string) {
		ok, b := getOK(base + "/readyz")
		return ok, string(b)
	}); err != nil {
		return pt, err
	}
	// The router's first replay (each publisher's buffer) is done when
	// every rank is exact; the warm-up runs from then.
	if err := waitFor(ctx, router, time.Minute, "every rank exact", func() (bool, string) {
		ranks, err := workerRanks(base)
		if err != nil || len(ranks) < c.Publishers {
			return false, fmt.Sprint(len(ranks), " ranks ", err)
		}
		for _, k := range ranks {
			if k.State != "exact" {
				return false, "a rank " + k.State
			}
		}
		return true, ""
	}); err != nil {
		return pt, err
	}
	if err := sleepCtx(ctx, c.Warmup); err != nil {
		return pt, err
	}
	pid, seen := router.cmd.Process.Pid, 0.0
	s0, sent0 := sampleRouter(base, pid, &seen), pubs.total()
	var profErr chan error
	if profiled {
		profErr = make(chan error, 1)
		go func() { profErr <- fetchProfile("http://"+addrs[1], c.Duration, c.RouterProfile) }()
	}
	if err := sleepCtx(ctx, c.Duration); err != nil {
		return pt, err
	}
	s1, sent1 := sampleRouter(base, pid, &seen), pubs.total()
	if profErr != nil {
		if err := <-profErr; err != nil {
			r.progress("router cpu profile: %v", err)
		} else {
			r.progress("router cpu profile of the %s blocks/s point: %s", offered(rate), c.RouterProfile)
		}
	}
	wall := s1.at.Sub(s0.at).Seconds()
	pt.Wall, pt.Sent, pt.RouterCPU = wall, float64(sent1-sent0)/wall, s1.cpu-s0.cpu
	if s0.cpu < 0 || s1.cpu < 0 {
		pt.RouterCPU = -1
	}
	pt.Applied = -1
	pt.Gaps, pt.Replays, pt.Resyncs, pt.Dropped = -1, -1, -1, -1
	if m0, m1 := s0.counters, s1.counters; m0 != nil && m1 != nil {
		d := func(name string) float64 { return m1[name] - m0[name] }
		pt.Applied = d("kvrouter_index_stored_blocks_total") / wall
		pt.Gaps, pt.Replays, pt.Resyncs = d("kvrouter_seq_gaps_total"), d("kvrouter_replays_total"), d("kvrouter_resyncs_total")
		pt.Dropped = d("kvrouter_dropped_messages_total") + d("kvrouter_history_lost_batches_total")
	}
	r.progress("%s blocks/s: %s", offered(rate), pt.brief())
	return pt, nil
}

// ingestMetrics are the router counters a point reads.
var ingestMetrics = []string{"kvrouter_index_stored_blocks_total", "kvrouter_seq_gaps_total", "kvrouter_replays_total",
	"kvrouter_resyncs_total", "kvrouter_dropped_messages_total", "kvrouter_history_lost_batches_total", readErrors}

// readErrors counts the router's actor requests a scrape left out: a
// scrape that raised it misses figures.
const readErrors = "kvrouter_telemetry_read_errors_total"

// routerSample is the router's counters and CPU time at one moment.
type routerSample struct {
	counters map[string]float64 // nil: unknown
	cpu      float64            // -1: unknown
	at       time.Time
}

// sampleRouter reads ingestMetrics and the router's CPU time. A scrape
// whose read errors passed *seen missed figures (an actor of the router
// did not answer in time, as under load it may not): it is retried, up to
// 5 scrapes, each compared with the one before. at is the middle of the
// scrape kept.
func sampleRouter(base string, pid int, seen *float64) routerSample {
	for range 5 {
		t0, cpu := time.Now(), procCPU(pid)
		m, err := counterSums(base, ingestMetrics...)
		if err != nil {
			continue
		}
		at := t0.Add(time.Since(t0) / 2)
		if m[readErrors] == *seen {
			return routerSample{counters: m, cpu: (cpu + procCPU(pid)) / 2, at: at}
		}
		*seen = m[readErrors]
	}
	return routerSample{cpu: procCPU(pid), at: time.Now()}
}

// sleepCtx waits d or until ctx ends (the harness's pacing, not a test's).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
