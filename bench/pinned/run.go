package pinned

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Point is one (ingest, rate) point: the floor and the router measured
// with the same generator, pinning and engines.
type Point struct {
	Ingest float64 `json:"ingest_blocks_per_s"`
	Rate   float64 `json:"rate"`
	Floor  Stats   `json:"floor"`
	Router Stats   `json:"router"`
	// FloorIngest and RouterIngest are the blocks/s the engines stored
	// while each was measured (the router ingested the latter).
	FloorIngest, RouterIngest float64
	// Replays and Resyncs counted by the router during its point: > 0 means
	// it fell behind the engines (a PUB dropped, the gap was repaired or
	// the stream's state dropped); -1 when the router's /metrics did not
	// answer (within 2 s) at the point's start or end.
	Replays, Resyncs float64
}

// Report is a pinned run.
type Report struct {
	Config Config `json:"-"`
	// Pinning says how processes were placed ("" when pinned as asked).
	Pinning string
	// Fill is, per ingest rate, the router's smallest rank (in blocks, as a
	// fraction of Capacity) when its points began.
	Fill []float64
	// LoadBefore and LoadAfter are /proc/loadavg's 1-minute figure.
	LoadBefore, LoadAfter string
	CPUs                  int
	Points                []Point
}

// Run measures the floor and the router at every (ingest, rate) of cfg.
// The engines start first (pinned to LoadCPU) and run through both
// phases; the floor (then the router) runs alone on RouterCPU.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bodies, err := routeBodies(cfg.Trace, cfg.TokensPerBlock, cfg.Seed, "default")
	if err != nil {
		return nil, err
	}
	pin, note := newPinning(cfg.Pin)
	rep := &Report{Config: cfg, Pinning: note, LoadBefore: loadAverage(), CPUs: runtime.NumCPU()}
	if err := pin.self(cfg.LoadCPU); err != nil {
		return nil, err
	}
	restore, err := setNice(cfg.Nice)
	defer restore()
	if err != nil {
		return nil, err
	}
	if pin.taskset != "" {
		// GOMAXPROCS was read from the affinity at start-up (every core):
		// on one core a second P only spins and steals.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	r := &runner{cfg: cfg, pin: pin, rep: rep, gen: &generator{bodies: bodies, maxWorkers: uint64(cfg.MaxConns), timeout: cfg.Timeout}, prompts: len(bodies)}
	for _, ingest := range cfg.Ingest {
		if err := r.ingestRate(ctx, ingest); err != nil {
			return nil, err
		}
	}
	rep.LoadAfter = loadAverage()
	return rep, nil
}

type runner struct {
	cfg      Config
	pin      pinning
	rep      *Report
	gen      *generator
	prompts  int
	profiled bool // a router run had the profiler (profile.go)
}

func (r *runner) progress(format string, a ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "pinned: "+format+"\n", a...)
	}
}

// engines are the running simulated engines (or replay publishers) and
// their block counters (from their status lines).
type engines struct {
	procs  []*proc
	stored []atomic.Uint64
	up     atomic.Int32 // engines that have reported a status line
	pubs   []string
	replay []string
}

func (e *engines) total() uint64 {
	var n uint64
	for i := range e.stored {
		n += e.stored[i].Load()
	}
	return n
}

// waitUp waits until every engine has loaded its trace and reported a
// status line (its pacing clock runs from then).
func (e *engines) waitUp(ctx context.Context) error {
	err := waitFor(ctx, e.procs[0], time.Minute, "every engine's status line", func() (bool, string) {
		for _, p := range e.procs {
			if p.exited() {
				return true, ""
			}
		}
		return int(e.up.Load()) == len(e.procs), fmt.Sprintf("%d of %d engines up", e.up.Load(), len(e.procs))
	})
	for _, p := range e.procs {
		if p.exited() {
			return fmt.Errorf("%s exited:\n%s", p.name, p.lastLines())
		}
	}
	return err
}

// pids are the engines' process ids (taskset and nice exec the engine, so
// each is the engine's own).
func (e *engines) pids() []int {
	var pids []int
	for _, p := range e.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

func (e *engines) stop() {
	for _, p := range e.procs {
		p.stop()
	}
}

// startEngines starts cfg.Engines `kvrouter sim` processes offering ingest
// blocks/s between them, engine i starting i/Engines into the trace.
func (r *runner) startEngines(ingest float64) (*engines, error) {
	addrs, err := freeAddrs(2 * r.cfg.Engines)
	if err != nil {
		return nil, err
	}
	e := &engines{stored: make([]atomic.Uint64, r.cfg.Engines)}
	for i := range r.cfg.Engines {
		pub, rep := "tcp://"+addrs[2*i], "tcp://"+addrs[2*i+1]
		tpb := strconv.Itoa(r.cfg.TokensPerBlock)
		argv := r.pin.argv(r.cfg.LoadCPU, []string{"nice", "-n", strconv.Itoa(r.cfg.EngineNice - r.cfg.Nice), r.cfg.KVRouter, "sim", "--driver", "trace", "--trace", r.cfg.Trace,
			"--tokens-per-block", tpb, "--block-size", tpb, "--seed", strconv.FormatUint(r.cfg.Seed, 10),
			"--capacity", strconv.Itoa(r.cfg.Capacity), "--block-rate", strconv.FormatFloat(ingest/float64(r.cfg.Engines), 'f', -1, 64),
			"--loop", "--skip", strconv.Itoa(i * r.prompts / r.cfg.Engines),
			"--endpoint", pub, "--replay-endpoint", rep, "--status", "200ms"})
		if err := e.start(fmt.Sprintf("engine %d", i+1), argv, i, "stored"); err != nil {
			e.stop()
			return nil, err
		}
		e.pubs, e.replay = append(e.pubs, pub), append(e.replay, rep)
	}
	return e, nil
}

// start starts engine i's process; its status lines' field=N is its
// counter (stored for an engine, sent for a replay publisher).
func (e *engines) start(name string, argv []string, i int, field string) error {
	counter, seen := &e.stored[i], false
	p, err := startProc(name, argv, func(line string) {
		if v, ok := statusField(line, field); ok {
			counter.Store(v)
			if !seen {
				seen = true
				e.up.Add(1)
			}
		}
	})
	if err != nil {
		return err
	}
	e.procs = append(e.procs, p)
	return nil
}

// statusField reads field=N from a `kvrouter sim` status line.
func statusField(line, field string) (uint64, bool) {
	_, rest, ok := strings.Cut(line, " "+field+"=")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
	return v, err == nil
}

// ingestRate runs the floor's and the router's points at one ingest rate.
func (r *runner) ingestRate(ctx context.Context, ingest float64) error {
	r.progress("%s blocks/s: starting %d engines", human(ingest), r.cfg.Engines)
	eng, err := r.startEngines(ingest)
	if err != nil {
		return err
	}
	defer eng.stop()
	if err := eng.waitUp(ctx); err != nil {
		return err
	}
	points := make([]Point, len(r.cfg.Rates))
	for i, rate := range r.cfg.Rates {
		points[i] = Point{Ingest: ingest, Rate: rate}
	}
	if err := r.floorPhase(ctx, eng, points); err != nil {
		return err
	}
	if err := r.routerPhase(ctx, eng, points); err != nil {
		return err
	}
	r.rep.Points = append(r.rep.Points, points...)
	return nil
}

// measure offers one point to base (served by process server) while the
// engines run; it returns the point's stats, with what it cost in CPU, and
// the engines' stored blocks/s meanwhile.
func (r *runner) measure(ctx context.Context, eng *engines, server *proc, base string, rate float64) (Stats, float64) {
	clock := cpuClock{server: server.cmd.Process.Pid, engines: eng.pids()}
	s0, c0 := eng.total(), clock.read()
	st := r.gen.offer(ctx, base+"/route", rate, r.cfg.Warmup, r.cfg.Duration)
	c1 := clock.read()
	st.CPU = cost(c0, c1, st.Answered, st.Sent)
	return st, float64(eng.total()-s0) / c1.at.Sub(c0.at).Seconds()
}

func (r *runner) floorPhase(ctx context.Context, eng *engines, points []Point) error {
	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	base := "http://" + addrs[0]
	p, err := startProc("floor server", r.pin.argv(r.cfg.RouterCPU, append(append([]string{}, r.cfg.Floor...), "--http", addrs[0])), nil)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := waitFor(ctx, p, 30*time.Second, "health", func() (bool, string) {
		ok, b := getOK(base + "/healthz")
		return ok, string(b)
	}); err != nil {
		return err
	}
	for i := range points {
		if err := ctx.Err(); err != nil {
			return err
		}
		points[i].Floor, points[i].FloorIngest = r.measure(ctx, eng, p, base, points[i].Rate)
		r.progress("floor    %6s req/s: %s", human(points[i].Rate), points[i].Floor.brief())
	}
	return nil
}

func (r *runner) routerPhase(ctx context.Context, eng *engines, points []Point) error {
	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	base := "http://" + addrs[0]
	argv := []string{r.cfg.KVRouter, "serve", "--http", addrs[0], "--block-size", strconv.Itoa(r.cfg.TokensPerBlock),
		"--shards", strconv.Itoa(r.cfg.Shards)}
	prof := r.profiler()
	if prof != nil {
		argv = append(argv, "--pprof-listen", prof.addr)
	}
	for i := range eng.pubs {
		argv = append(argv, "--worker", fmt.Sprintf("%d=%s,replay=%s", i+1, eng.pubs[i], eng.replay[i]))
	}
	p, err := startProc("kvrouter serve", r.pin.argv(r.cfg.RouterCPU, argv), nil)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := waitFor(ctx, p, 30*time.Second, "readiness", func() (bool, string) {
		ok, b := getOK(base + "/readyz")
		return ok, string(b)
	}); err != nil {
		return err
	}
	fill := r.waitFill(ctx, p, base)
	r.rep.Fill = append(r.rep.Fill, fill)
	r.progress("router: smallest rank at %.0f%% of its engine's capacity", 100*fill)
	for i := range points {
		if err := ctx.Err(); err != nil {
			return err
		}
		rp0, rs0, ok0 := r.fellBehind(base)
		shed0, _ := counterSum(base, shedCounters...)
		profiled := prof.during(r.cfg, points[i].Rate)
		points[i].Router, points[i].RouterIngest = r.measure(ctx, eng, p, base, points[i].Rate)
		if profiled != nil {
			if err := profiled(); err != nil {
				r.progress("router cpu profile: %v", err)
			} else {
				r.progress("router cpu profile of the %s req/s point: %s", human(points[i].Rate), r.cfg.RouterProfile)
			}
		}
		rp1, rs1, ok1 := r.fellBehind(base)
		if shed1, err := counterSum(base, shedCounters...); err == nil && shed1 > shed0 {
			r.progress("kvrouter %6s req/s: %.0f requests shed (over the admission cap, or past their deadline in a shard or the route actor)",
				human(points[i].Rate), shed1-shed0)
		}
		points[i].Replays, points[i].Resyncs = rp1-rp0, rs1-rs0
		if !ok0 || !ok1 {
			points[i].Replays, points[i].Resyncs = -1, -1 // the router did not answer /metrics
		}
		r.progress("kvrouter %6s req/s: %s, engines %s blocks/s, replays %.0f resyncs %.0f", human(points[i].Rate),
			points[i].Router.brief(), human(points[i].RouterIngest), points[i].Replays, points[i].Resyncs)
	}
	return nil
}

// shedCounters are the router's counters of requests it answered at once
// without the work: refused over the admission cap, expired in a stage.
var shedCounters = []string{"kvrouter_route_admission_refused_total", "kvrouter_route_expired_total"}

// waitFill waits until every rank is exact and holds Fill × Capacity
// blocks, or FillTimeout passes; it returns the smallest rank's fill.
func (r *runner) waitFill(ctx context.Context, p *proc, base string) float64 {
	var low float64
	_ = waitFor(ctx, p, r.cfg.FillTimeout, "index fill", func() (bool, string) {
		ranks, err := workerRanks(base)
		if err != nil || len(ranks) < r.cfg.Engines {
			return false, fmt.Sprint(len(ranks), " ranks ", err)
		}
		low = 1
		exact := true
		for _, k := range ranks {
			low = min(low, float64(k.Blocks)/float64(r.cfg.Capacity))
			exact = exact && k.State == "exact"
		}
		return exact && low >= r.cfg.Fill, fmt.Sprintf("smallest rank %.0f%%", 100*low)
	})
	return low
}

// fellBehind reads the router's replay and resync counters; ok is false
// when /metrics did not answer.
func (r *runner) fellBehind(base string) (replays, resyncs float64, ok bool) {
	replays, err1 := counterSum(base, "kvrouter_replays_total")
	resyncs, err2 := counterSum(base, "kvrouter_resyncs_total")
	return replays, resyncs, err1 == nil && err2 == nil
}

// loadAverage is /proc/loadavg's 1-minute figure ("?" where absent).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
