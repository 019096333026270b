package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultRepro is the command that reruns one trial of the default config.
const DefaultRepro = "KVROUTER_CHAOS_SEED=%d go test ./bench/chaos -run TestChaosSeed -v"

// Config configures Run. Zero values take the defaults noted.
type Config struct {
	// Trials to run (default 100); trial i has seed Seed+i.
	Trials int
	Seed   uint64
	// Plan shapes each trial's plan.
	Plan PlanConfig
	// Concurrency is how many trials run at once (default 2). Trials mostly
	// wait on sockets and timers.
	Concurrency int
	// ReplayTimeout and Silence configure the router's listeners (defaults
	// 300 ms each): short, so that a trial settles in well under a second.
	ReplayTimeout, Silence time.Duration
	// SettleTimeout bounds joining and settling (default 15 s).
	SettleTimeout time.Duration
	// Repro is a format with one %d (the seed): the command that reruns a
	// trial, printed with each failure (default DefaultRepro).
	Repro string
	// Logger receives the pipelines' logs (default: discarded).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Trials <= 0 {
		c.Trials = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 2
	}
	if c.ReplayTimeout <= 0 {
		c.ReplayTimeout = 300 * time.Millisecond
	}
	if c.Silence <= 0 {
		c.Silence = 300 * time.Millisecond
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = 15 * time.Second
	}
	if c.Repro == "" {
		c.Repro = DefaultRepro
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Report is the outcome of Run.
type Report struct {
	Config  Config
	Trials  []Trial // in seed order
	Elapsed time.Duration
}

// Failures returns the trials that broke a rule or did not settle.
func (r *Report) Failures() []Trial {
	var f []Trial
	for _, t := range r.Trials {
		if t.Failed() {
			f = append(f, t)
		}
	}
	return f
}

// Run runs cfg.Trials trials with seeds cfg.Seed, cfg.Seed+1, …, at most
// cfg.Concurrency at a time. It stops early (with the trials run so far)
// when ctx ends.
func Run(ctx context.Context, cfg Config) *Report {
	cfg = cfg.withDefaults()
	start := time.Now()
	r := &Report{Config: cfg, Trials: make([]Trial, cfg.Trials)}
	seeds := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range seeds {
				r.Trials[i] = RunTrial(ctx, cfg, cfg.Seed+uint64(i))
			}
		}()
	}
	n := 0
	for ; n < cfg.Trials && ctx.Err() == nil; n++ {
		seeds <- n
	}
	close(seeds)
	wg.Wait()
	r.Trials = r.Trials[:n]
	r.Elapsed = time.Since(start)
	return r
}

// Summary holds a report's figures.
type Summary struct {
	Trials, Failed, Streams int
	Exact, Degraded         int               // streams by final state
	Injected                map[FaultKind]int // faults carried out
	Resyncs, Replays        map[string]uint64 // listeners' counters, summed
	BlocksChecked           int               // engine blocks compared
	Violations              map[Rule]int      // streams breaking each rule
	SlowestTrial            time.Duration
}

// Summary sums the report's figures.
func (r *Report) Summary() Summary {
	s := Summary{Trials: len(r.Trials), Injected: map[FaultKind]int{}, Resyncs: map[string]uint64{},
		Replays: map[string]uint64{}, Violations: map[Rule]int{}}
	for _, t := range r.Trials {
		if t.Failed() {
			s.Failed++
		}
		s.SlowestTrial = max(s.SlowestTrial, t.Elapsed)
		for _, h := range t.Hops {
			for k, v := range h.Injected {
				s.Injected[k] += v
			}
		}
		for _, e := range t.Plan.Engines {
			for _, f := range e.Faults {
				if !f.Kind.OnMessage() && f.At < e.Prompts && t.Err == nil {
					s.Injected[f.Kind]++
				}
			}
		}
		for _, l := range t.Listeners {
			for k, v := range l.Resyncs {
				s.Resyncs[k] += v
			}
			for k, v := range l.Replays {
				s.Replays[k] += v
			}
		}
		for _, st := range t.Streams {
			s.Streams++
			s.BlocksChecked += st.Held
			switch st.State {
			case "exact":
				s.Exact++
			case "degraded":
				s.Degraded++
			}
			for _, v := range st.Violations {
				s.Violations[v.Rule]++
			}
		}
	}
	return s
}

// WriteText writes the summary and, for each failed trial, its seed, the
// command that reruns it, its plan and the checker's verdicts.
func (r *Report) WriteText(w io.Writer) error {
	s := r.Summary()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d trials (seeds %d..%d) in %v, %d failed; slowest trial %v\n",
		s.Trials, r.Config.Seed, r.Config.Seed+uint64(max(s.Trials, 1)-1), r.Elapsed.Round(time.Millisecond), s.Failed, s.SlowestTrial.Round(time.Millisecond))
	fmt.Fprintf(&b, "streams: %d (%d exact, %d degraded), %d engine blocks checked\n", s.Streams, s.Exact, s.Degraded, s.BlocksChecked)
	fmt.Fprintf(&b, "faults injected: %s\n", formatCounts(s.Injected))
	fmt.Fprintf(&b, "resyncs: %s; replays: %s\n", formatCounts(s.Resyncs), formatCounts(s.Replays))
	if len(s.Violations) > 0 {
		fmt.Fprintf(&b, "violations (streams): %s\n", formatCounts(s.Violations))
	}
	for _, t := range r.Failures() {
		fmt.Fprintf(&b, "FAIL seed %d — rerun: %s\n", t.Plan.Seed, fmt.Sprintf(r.Config.Repro, t.Plan.Seed))
		b.WriteString(t.Describe())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Describe is the trial's plan and verdicts, indented, for failure output.
func (t Trial) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  plan: %s\n", strings.ReplaceAll(t.Plan.String(), "\n", "\n  "))
	if t.Err != nil {
		fmt.Fprintf(&b, "  error: %v\n", t.Err)
	}
	for _, st := range t.Streams {
		fmt.Fprintf(&b, "  %s\n", st)
	}
	for i, l := range t.Listeners {
		fmt.Fprintf(&b, "  listener %d: resyncs %v replays %v bad frames %v\n", i, l.Resyncs, l.Replays, l.BadFrames)
	}
	return b.String()
}

func formatCounts[K comparable, V int | uint64](m map[K]V) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%v %d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
