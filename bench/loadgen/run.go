package loadgen

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/traces"
	"github.com/kvrouter/kvrouter/cluster/clusterindex"
)

// Config is one `kvrouter-bench` run.
type Config struct {
	Mode           string   // label: "quick" or "full"
	Traces         []string // Mooncake JSONL trace references (traces.OpenRef)
	TokensPerBlock int      // tokens per trace hash_id (and per block)
	Requests       int      // requests per trace for the quality replays (0: all)
	Workers        []int    // worker counts of the quality replays
	Capacity       int      // cache capacity of each simulated engine, in blocks
	// InFlightPerWorker: in a kvrouter replay on w workers, a request's
	// load is freed InFlightPerWorker × w requests later, so the fleet
	// carries as many requests per worker whatever its size (a fixed
	// count below the worker count leaves workers idle whatever the
	// router does).
	InFlightPerWorker int
	Sessions          []bool // kvrouter replays: with session ids (true) and/or without (false)
	// Predict: kvrouter replays with predict-on-route (true, serve's
	// default) and/or without (false: --predict-ttl 0).
	Predict []bool
	// Delay is the event-delay model of every quality replay (delay.go).
	Delay EventDelay
	// Outside, when its fraction is set, replaces the quality replays by
	// the outside-load replays (outside_run.go).
	Outside OutsideLoad
	Shards  []int // index shard counts (pipeline.Config.Index.Shards)
	// Hosts are the router host counts: 1 runs one router with each of
	// Shards; n > 1 runs n cluster members on loopback in this process
	// with clusterindex.DefaultShards shard grains. An ingest run and the
	// kvrouter replays (with their sweep and memory) per layout.
	Hosts []int
	// OverlapWeights are the routing cost's overlap weights the kvrouter
	// replays run with (routing.Config.OverlapWeight), one replay each;
	// the sweep and memory use the first.
	OverlapWeights []float64
	Temperature    float64 // routing.Config.Temperature of every kvrouter replay
	SessionCredit  float64 // service.Config.SessionCredit (kvrouter serve's --session-credit)
	IngestWorkers  int     // engines of the ingest phase (0: skip it)
	IngestPasses   int     // trace passes of the ingest phase, each with fresh prompts
	SweepWorkers   []int   // worker counts whose replay is followed by the latency sweep
	Rates          []float64
	PointDuration  time.Duration // per sweep point
	Clients        int           // concurrent clients of the sweep (and HTTP connections)
	Transports     []string      // TransportInProcess, TransportHTTP
	Feed           string        // how the sweep's routed requests reach the engines: FeedAsync, FeedInline or FeedNone
	Seed           uint64        // of the seeded baselines (random, exact-greedy, llm-d's and AIBrix's ties)
	// NoMemory skips the memory measure after the kvrouter replays.
	NoMemory bool
	// MemProfile, when set, is the path prefix of heap profiles written at
	// each memory measure's two moments, for the measured router and the
	// empty one (memProfilePath). The caller sets runtime.MemProfileRate
	// (kvrouter-bench --memprofile: 1, every allocation) before the run.
	MemProfile string
	// Progress receives a line per finished step (nil: none).
	Progress io.Writer
	// Logger is the router's logger (nil: discard).
	Logger *slog.Logger
}

// The default traces: the embedded copies (package bench/traces).
const (
	ConversationTrace = traces.BuiltinPrefix + traces.Conversation
	SyntheticTrace    = traces.BuiltinPrefix + traces.Synthetic
)

// DefaultSessionCredit is kvrouter serve's --session-credit default.
const DefaultSessionCredit = 1

// QuickConfig is the quick mode (under two minutes on 2 cores): the first
// 2,000 conversation requests on 4, 16 and 64 workers, each with an index
// of 1, 2 and 4 shards, one ingest pass per shard count, and a sweep of
// 1 s points on 16 workers per shard count; one host (--hosts adds
// clusters).
func QuickConfig() Config {
	return Config{
		Mode: "quick", Traces: []string{ConversationTrace}, TokensPerBlock: 16, Requests: 2000,
		Workers: []int{4, 16, 64}, Capacity: 8192, InFlightPerWorker: 2, Sessions: []bool{true}, Predict: []bool{true}, Delay: DefaultEventDelay(), Shards: []int{1, 2, 4}, Hosts: []int{1},
		OverlapWeights: []float64{routing.DefaultConfig().OverlapWeight}, SessionCredit: DefaultSessionCredit,
		IngestWorkers: 8, IngestPasses: 1, SweepWorkers: []int{16},
		Rates:         []float64{1000, 2000, 5000, 10000, 20000, 40000, 80000},
		PointDuration: time.Second, Clients: 64, Transports: []string{TransportInProcess, TransportHTTP}, Feed: FeedAsync, Seed: 1,
	}
}

// FullConfig is the full mode: the four workloads (the two Mooncake
// traces, the generated agentic and burst workloads) in full on 4, 16, 64 and 1,000
// workers (one index shard on one host, then 2 and 3 hosts), kvrouter with
// and without session ids at its default cost, four ingest passes, and
// sweeps of 3 s points on 16 and 1,000 workers.
func FullConfig() Config {
	c := QuickConfig()
	c.Mode, c.Traces, c.Requests = "full", []string{ConversationTrace, SyntheticTrace, AgenticTrace, BurstTrace}, 0
	c.Workers, c.Sessions, c.IngestPasses, c.Shards, c.Hosts = []int{4, 16, 64, 1000}, []bool{true, false}, 4, []int{1}, []int{1, 2, 3}
	c.SweepWorkers, c.PointDuration = []int{16, 1000}, 3*time.Second
	c.Rates = []float64{1000, 2000, 5000, 10000, 20000, 40000, 60000, 80000, 120000}
	return c
}

// QualityConfig is the routing-quality preset: the full mode's traces (the
// two Mooncake traces, the generated agentic and burst workloads) in full on 4, 16,
// 64 and 1,000 workers, kvrouter's replays on one host with session ids,
// with and without predict-on-route, every baseline beside them; no ingest
// phase, sweep, memory measure or cluster.
func QualityConfig() Config {
	c := FullConfig()
	c.Mode, c.Sessions, c.Hosts, c.IngestWorkers, c.SweepWorkers, c.Rates = "quality", []bool{true}, []int{1}, 0, nil, nil
	c.Predict = []bool{true, false}
	c.NoMemory = true
	return c
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	if err := c.Outside.Validate(); err != nil {
		return err
	}
	switch {
	case len(c.Traces) == 0:
		return errors.New("no trace")
	case c.TokensPerBlock <= 0 || c.Capacity <= 0:
		return fmt.Errorf("tokens per block %d and capacity %d must be positive", c.TokensPerBlock, c.Capacity)
	case c.Requests < 0 || c.InFlightPerWorker < 0 || c.IngestWorkers < 0 || c.IngestPasses < 0:
		return errors.New("negative count")
	case len(c.Workers) == 0 || slices.Min(c.Workers) <= 0:
		return errors.New("worker counts must be positive")
	case len(c.Sessions) == 0 || len(c.Predict) == 0:
		return errors.New("no session or prediction setting")
	case c.Clients <= 0 || c.PointDuration <= 0:
		return errors.New("sweep clients and point duration must be positive")
	case len(c.OverlapWeights) == 0 || slices.Min(c.OverlapWeights) < 0 || c.Temperature < 0 || c.SessionCredit < 0:
		return errors.New("overlap weights (at least one), temperature and session credit must not be negative")
	case !slices.Contains([]string{FeedAsync, FeedInline, FeedNone}, c.Feed):
		return fmt.Errorf("unknown feed %q (want %s, %s or %s)", c.Feed, FeedAsync, FeedInline, FeedNone)
	}
	if err := c.Delay.Validate(); err != nil {
		return err
	}
	for _, r := range c.Rates {
		if r <= 0 {
			return fmt.Errorf("rate %v must be positive", r)
		}
	}
	for _, t := range c.Transports {
		if t != TransportInProcess && t != TransportHTTP {
			return fmt.Errorf("unknown transport %q (want %s or %s)", t, TransportInProcess, TransportHTTP)
		}
	}
	if len(c.Shards) == 0 || slices.Min(c.Shards) <= 0 {
		return errors.New("shard counts must be positive")
	}
	if len(c.Hosts) == 0 || slices.Min(c.Hosts) <= 0 {
		return errors.New("host counts must be positive")
	}
	return nil
}

// Run measures everything cfg asks for and returns the report.
func Run(cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	r := &runner{cfg: cfg, rep: &Report{Mode: cfg.Mode, Machine: ReadMachine(), Config: ReportConfig{
		TokensPerBlock: cfg.TokensPerBlock, Requests: cfg.Requests, Capacity: cfg.Capacity, InFlightPerWorker: cfg.InFlightPerWorker,
		Shards: cfg.Shards, Hosts: cfg.Hosts, OverlapWeights: cfg.OverlapWeights, Temperature: cfg.Temperature, SessionCredit: cfg.SessionCredit,
		Clients: cfg.Clients, PointSeconds: cfg.PointDuration.Seconds(), Feed: cfg.Feed, EventDelay: cfg.Delay.Label()}}}
	start := time.Now()
	for i, path := range cfg.Traces {
		r.rep.Config.Traces = append(r.rep.Config.Traces, TraceLabel(path))
		if err := r.trace(path, i == 0); err != nil {
			return r.rep, err
		}
	}
	r.rep.Seconds = time.Since(start).Seconds()
	return r.rep, nil
}

// runner carries one Run's state.
type runner struct {
	cfg Config
	rep *Report
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
	}
}

// layout is where the index runs: on hosts routers, in shards shards (shard
// actors on one host, grains per namespace in a cluster).
type layout struct{ hosts, shards int }

// layouts are the configured layouts: one host with each shard count, then
// each larger host count with the cluster's default grain count.
func (r *runner) layouts() []layout {
	var out []layout
	for _, h := range r.cfg.Hosts {
		if h == 1 {
			for _, s := range r.cfg.Shards {
				out = append(out, layout{1, s})
			}
		} else {
			out = append(out, layout{h, clusterindex.DefaultShards})
		}
	}
	return out
}

// String labels a layout in progress lines: "2 shards" or "3 hosts".
func (l layout) String() string {
	if l.hosts > 1 {
		return fmt.Sprintf("%d hosts", l.hosts)
	}
	return fmt.Sprintf("%d shards", l.shards)
}

// clusterConfig sizes a cluster; weight is the routing overlap weight.
func (r *runner) clusterConfig(workers int, l layout, weight float64, predict bool) clusterConfig {
	// A source of its own, seeded: sampling (temperature > 0) repeats,
	// and a weight of 0 is taken as given (service.New reads a config
	// without weight, temperature and source as "unset").
	rc := routing.DefaultConfig()
	rc.OverlapWeight, rc.Temperature, rc.Rand = weight, r.cfg.Temperature, rand.NewPCG(r.cfg.Seed, uint64(workers))
	return clusterConfig{Workers: workers, BlockSize: r.cfg.TokensPerBlock, Capacity: r.cfg.Capacity, Shards: l.shards, Hosts: l.hosts,
		Routing: rc, SessionCredit: r.cfg.SessionCredit, NoPredict: !predict, Logger: r.cfg.Logger, MemProfile: r.cfg.MemProfile}
}

// trace runs every phase on one trace; the sweep only on the first. The
// baselines come first, then each layout's ingest run and kvrouter replays
// — one layout after the other, so that a cluster's members, which wind
// down in the background after leaving, come after every one-host
// measurement.
func (r *runner) trace(path string, first bool) error {
	name := TraceLabel(path)
	reqs, err := LoadTrace(path, TraceOptions{TokensPerBlock: r.cfg.TokensPerBlock, Limit: r.cfg.Requests})
	if err != nil {
		return err
	}
	if r.cfg.Outside.Fraction > 0 {
		return r.outsideTrace(name, reqs)
	}
	bounds := map[int]float64{}
	for _, workers := range r.cfg.Workers {
		if bounds[workers], err = r.offline(name, reqs, workers); err != nil {
			return err
		}
	}
	var sweepReqs []Request // fresh prompts (another token seed), loaded once
	for _, l := range r.layouts() {
		if r.cfg.IngestWorkers > 0 && r.cfg.IngestPasses > 0 {
			if err := r.ingest(path, l); err != nil {
				return err
			}
		}
		for _, workers := range r.cfg.Workers {
			for si, sessions := range r.cfg.Sessions {
				for wi, weight := range r.cfg.OverlapWeights {
					for pi, predict := range r.cfg.Predict {
						rs := replaySpec{workers: workers, layout: l, sessions: sessions, predict: predict, weight: weight, bound: bounds[workers],
							memory: si == 0 && wi == 0 && pi == 0 && !r.cfg.NoMemory}
						rs.sweep = first && rs.memory && slices.Contains(r.cfg.SweepWorkers, workers) && len(r.cfg.Rates) > 0
						if rs.sweep && sweepReqs == nil {
							if sweepReqs, err = LoadTrace(path, TraceOptions{TokensPerBlock: r.cfg.TokensPerBlock, Seed: 1}); err != nil {
								return err
							}
						}
						if err := r.kvrouter(name, reqs, rs, sweepReqs); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	return nil
}

// ingest runs the ingest phase on a fresh cluster.
func (r *runner) ingest(path string, l layout) error {
	var reqs []Request
	for pass := range r.cfg.IngestPasses {
		rs, err := LoadTrace(path, TraceOptions{TokensPerBlock: r.cfg.TokensPerBlock, Seed: uint64(pass) + 100})
		if err != nil {
			return err
		}
		reqs = append(reqs, rs...)
	}
	c, err := startCluster(r.clusterConfig(r.cfg.IngestWorkers, l, r.cfg.OverlapWeights[0], r.cfg.Predict[0]))
	if err != nil {
		return err
	}
	defer c.close()
	res, err := c.ingest(reqs)
	if err != nil {
		return err
	}
	res.Trace, res.Shards, res.Hosts = TraceLabel(path), l.shards, l.hosts
	r.rep.Ingest = append(r.rep.Ingest, res)
	r.progress("ingest  %-12s %4d workers %s: %s blocks/s, %s events/s, lag p99 %s µs (%s)", res.Trace, res.Workers, l,
		si(res.BlocksPerSec), si(res.EventsPerSec), us(res.Lag.P99), validity(res.Valid, res.Invalid))
	return nil
}

// cacheConfig is the offline replays' caches and engine model on workers.
func (r *runner) cacheConfig(reqs []Request, workers int) CacheConfig {
	gap := ArrivalGap(reqs, workers)
	return CacheConfig{Workers: workers, BlockSize: r.cfg.TokensPerBlock, Capacity: r.cfg.Capacity,
		InFlight: r.cfg.InFlightPerWorker * workers, Gap: gap, Arrivals: ArrivalTimes(reqs, gap), Delay: r.cfg.Delay}
}

// Baselines are the offline policies every quality replay compares with,
// peers first (bench/README.md, "Peers' policies").
func Baselines(workers int, seed uint64) ([]Policy, error) {
	dynamo, err := NewCore(NameDynamo, workers, routing.DynamoConfig())
	if err != nil {
		return nil, err
	}
	return []Policy{dynamo, NewSGLang(workers), NewLLMD(workers, seed), NewAIBrix(workers, seed),
		NewGreedy(workers, seed), NewRandom(workers, seed), NewRoundRobin(workers)}, nil
}

// offline replays the baseline policies and returns the clairvoyant hit
// rate (the bound the others are compared with).
func (r *runner) offline(name string, reqs []Request, workers int) (float64, error) {
	cc := r.cacheConfig(reqs, workers)
	t, err := ReplayClairvoyant(reqs, cc)
	if err != nil {
		return 0, err
	}
	bound := t.HitRate()
	r.addQuality(QualityRow{Trace: name, Workers: workers, Policy: NameClairvoyant, Valid: true}, t, bound)
	policies, err := Baselines(workers, r.cfg.Seed)
	if err != nil {
		return 0, err
	}
	for _, p := range policies {
		t, err := ReplayOffline(reqs, p, cc)
		if err != nil {
			return 0, err
		}
		r.addQuality(QualityRow{Trace: name, Workers: workers, Policy: p.Name(), Valid: true}, t, bound)
	}
	return bound, nil
}

func (r *runner) addQuality(row QualityRow, t Tally, bound float64) {
	row.HitRate = t.HitRate()
	for _, n := range t.Requests {
		row.Requests += n
	}
	if bound > 0 {
		row.OfBound = row.HitRate / bound
	}
	row.RequestCoV, row.PrefillCoV, row.Tally = t.RequestCoV(), t.PrefillCoV(), t
	row.TTFTMeanMs, row.TTFTP99Ms = ttftMs(t.TTFT)
	r.rep.Quality = append(r.rep.Quality, row)
	r.progress("quality %-12s %4d workers %-22s hit %5.1f%% (%5.1f%% of bound), request CoV %.3f, TTFT est mean %.1f ms", row.Trace, row.Workers, row.Policy,
		100*row.HitRate, 100*row.OfBound, row.RequestCoV, row.TTFTMeanMs)
}

// replaySpec is one kvrouter replay: the cluster, the routing settings, the
// clairvoyant bound of its worker count, and whether the latency sweep and
// the memory measure follow it.
type replaySpec struct {
	workers       int
	layout        layout
	sessions      bool
	predict       bool
	weight, bound float64
	memory, sweep bool
}

// policyName labels a kvrouter replay's rows: "kvrouter", with
// "/no-session" without session ids, "/no-predict" without
// predict-on-route, and " w=<weight>" when several
// overlap weights (or a weight other than the default) are compared.
func (r *runner) policyName(rs replaySpec) string {
	name := NameKVRouter
	if !rs.sessions {
		name += "/no-session"
	}
	if !rs.predict {
		name += "/no-predict"
	}
	if len(r.cfg.OverlapWeights) > 1 || rs.weight != routing.DefaultConfig().OverlapWeight {
		name += " w=" + strconv.FormatFloat(rs.weight, 'g', -1, 64)
	}
	return name
}

// kvrouter replays the trace through a fresh router, then (when asked)
// sweeps route latency on it, then measures its memory.
func (r *runner) kvrouter(name string, reqs []Request, rs replaySpec, sweepReqs []Request) error {
	cc := r.clusterConfig(rs.workers, rs.layout, rs.weight, rs.predict)
	clock := &modelClock{}
	cc.Routing.Now = clock.Now // the route actor on the model's time while the replay runs
	c, err := startCluster(cc)
	if err != nil {
		return err
	}
	defer c.close()
	mc := r.cacheConfig(reqs, rs.workers)
	run, err := c.replayRouted(reqs, routedReplay{sessions: rs.sessions, inFlight: mc.InFlight, gap: mc.Gap, arrivals: mc.Arrivals,
		delay: mc.Delay, clock: clock})
	clock.wall()
	if err != nil {
		return err
	}
	row := QualityRow{Trace: name, Workers: rs.workers, Shards: rs.layout.shards, Hosts: rs.layout.hosts, Policy: r.policyName(rs), OverlapWeight: rs.weight,
		Route: Summarize(run.route), Lag: Summarize(run.lags), Partial: run.partial}
	row.Valid, row.Invalid = c.validity(run.lags, run.timeouts)
	r.addQuality(row, run.tally, rs.bound)
	if c.setupClears > 0 {
		note := fmt.Sprintf("%s %s %d workers: %d AllBlocksCleared from empty engines re-synced streams degraded during setup, before the replay",
			name, row.Policy, rs.workers, c.setupClears)
		r.rep.Notes = append(r.rep.Notes, note)
		r.progress("setup   %s", note)
	}
	if rs.sweep {
		r.sweep(c, name, rs.layout, sweepReqs, rs.sessions)
	}
	// A cluster's heap cannot be told apart in one process: its members
	// wind down in the background after leaving (bench/README.md, "Cluster
	// index", measures how its entries spread instead).
	if !rs.memory || rs.layout.hosts > 1 {
		return nil
	}
	m, err := c.measureMemory("measured")
	if err != nil {
		return err
	}
	c.close() // before the empty router starts: one set of engines at a time
	if m.FixedBytes, err = emptyRouterHeap(cc); err != nil {
		return err
	}
	m.Trace, m.Shards, m.Hosts, m.BytesPerEntry = name, rs.layout.shards, rs.layout.hosts, PerEntry(m.HeapBytes, m.FixedBytes, m.Entries)
	r.rep.Memory = append(r.rep.Memory, m)
	r.progress("memory  %-12s %4d workers %s: %d entries, %.0f B/entry", name, rs.workers, rs.layout, m.Entries, m.BytesPerEntry)
	return nil
}

// sweep offers increasing rates over each transport until saturation.
func (r *runner) sweep(c *cluster, name string, l layout, reqs []Request, sessions bool) {
	offset := 0
	var svcs []*service.Service
	var urls []string
	for _, h := range c.hosts {
		svcs, urls = append(svcs, h.Service), append(urls, h.url)
	}
	for _, tname := range r.cfg.Transports {
		var t transport = &inProcess{svcs: svcs, reqs: reqs}
		if tname == TransportHTTP {
			h, err := newOverHTTP(urls, reqs, r.cfg.Clients)
			if err != nil {
				r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("http sweep skipped: %v", err))
				continue
			}
			t = h
		}
		for _, rate := range r.cfg.Rates {
			spec := pointSpec{rate: rate, duration: r.cfg.PointDuration, clients: r.cfg.Clients, offset: offset,
				sessions: sessions, feed: r.cfg.Feed, prefix: fmt.Sprintf("%s-%.0f-", tname, rate)}
			pt := c.sweepPoint(t, reqs, spec)
			offset += pt.Requests
			pt.Trace, pt.Transport, pt.Shards, pt.Hosts = name, tname, l.shards, l.hosts
			r.rep.Sweep = append(r.rep.Sweep, pt)
			r.progress("sweep   %-10s %4d workers %s %7s/s offered: %7s/s, p50 %s µs, p99 %s µs, p99.9 %s µs, sched p99 %s µs%s (%s)", tname, pt.Workers, l,
				si(pt.Offered), si(pt.Achieved), us(pt.Latency.P50), us(pt.Latency.P99), us(pt.Latency.P999), us(pt.SchedP99),
				map[bool]string{true: ", saturated", false: ""}[pt.Saturated], validity(pt.Valid, pt.Invalid))
			if pt.Saturated {
				break
			}
		}
	}
}

// ReadMachine describes this machine: CPUs, the CPU model from
// /proc/cpuinfo (when readable), the Go version and today's date.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format("2006-01-02"), CPUModel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = CPUModel(string(b))
	}
	return m
}

// CPUModel extracts the first "model name" of a /proc/cpuinfo text
// ("unknown" when there is none).
func CPUModel(cpuinfo string) string {
	for line := range strings.Lines(cpuinfo) {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
