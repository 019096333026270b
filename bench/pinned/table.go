package pinned

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report: a header saying how processes were placed
// and how loaded the machine was, then one row per (ingest, rate) with the
// floor's and the router's p50/p99/p99.9 and their ratio.
func (r *Report) WriteTable(w io.Writer) error {
	c := r.Config
	place := fmt.Sprintf("router (and floor) on cpu %d; generator and %d engines on cpu %d (taskset)", c.RouterCPU, c.Engines, c.LoadCPU)
	if r.Pinning != "" {
		place = r.Pinning
	}
	fmt.Fprintf(w, "pinned /route load: open loop, latency from each request's scheduled send time; %s\n", place)
	fmt.Fprintf(w, "generator, router and floor at nice %d, engines at nice %d; %d cpus, load average %s → %s; %v per point after %v warm-up; bodies: %s at %d tokens per block; engine caches %d blocks; index fill at start %s\n",
		c.Nice, c.EngineNice, r.CPUs, r.LoadBefore, r.LoadAfter, c.Duration, c.Warmup, c.Trace, c.TokensPerBlock, c.Capacity, fills(r.Fill))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ingest\trate\tfloor p50\tp99\tp99.9\tkvrouter p50\tp99\tp99.9\t×p50\t×p99\t×p99.9\tcpu µs/ok f/k\t×cpu\tkvrouter ok/s\terrors f/k\tsend lag p99 f/k\tengines blocks/s\tload core f/k\treplays+resyncs\tsaturated\t")
	for _, p := range r.Points {
		f, k := p.Floor.Latency, p.Router.Latency // N = 0: nothing answered, shown as -
		fc, kc := p.Floor.CPU, p.Router.CPU
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\t%d/%d\t%s/%s\t%s\t%s/%s\t%s\t%s\t\n",
			human(p.Ingest), human(p.Rate), dur(f.P50), dur(f.P99), dur(f.P999), dur(k.P50), dur(k.P99), dur(k.P999),
			ratio(k.P50, f.P50), ratio(k.P99, f.P99), ratio(k.P999, f.P999),
			cpuUS(fc.ServerPerOK), cpuUS(kc.ServerPerOK), ratio(kc.ServerPerOK, fc.ServerPerOK), human(p.Router.Throughput),
			p.Floor.Errors, p.Router.Errors, dur(p.Floor.SendLag.P99), dur(p.Router.SendLag.P99), human(p.RouterIngest),
			share(fc.Generator+fc.Engines, 1), share(kc.Generator+kc.Engines, 1), behind(p), saturated(p))
	}
	return tw.Flush()
}

// brief is a progress line's summary of a point.
func (s Stats) brief() string {
	b := fmt.Sprintf("p50 %s p99 %s p99.9 %s, %d/%d ok, send lag p99 %s; cpu: server %s/ok (%s of its core), generator %s/sent (%s), engines %s",
		dur(s.Latency.P50), dur(s.Latency.P99), dur(s.Latency.P999), s.OK, s.Scheduled, dur(s.SendLag.P99),
		cpuUS(s.CPU.ServerPerOK), share(s.CPU.Server, 1), cpuUS(s.CPU.GeneratorPerSent), share(s.CPU.Generator, 1), share(s.CPU.Engines, 1))
	if len(s.ErrorKinds) > 0 {
		b += fmt.Sprintf(", errors %v", s.ErrorKinds)
	}
	if s.Refusal.N > 0 {
		b += fmt.Sprintf(", refusals p50 %s p99 %s", dur(s.Refusal.P50), dur(s.Refusal.P99))
	}
	return b
}

func fills(fs []float64) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%.0f%%", 100*f))
	}
	return strings.Join(parts, ", ")
}

// dur formats microseconds: 85µs, 1.25ms, 2.3s; "-" for 0 (a point with
// no answer).
func dur(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	}
	return fmt.Sprintf("%.1fs", us/1e6)
}

// cpuUS formats CPU µs per request: 41µs, 1.2ms ("-" when not read).
func cpuUS(us float64) string {
	if us > 0 && us < 10 {
		return fmt.Sprintf("%.1fµs", us)
	}
	return dur(us)
}

// ratio is a/b: 1.4×, 37× ("-" without a floor).
func ratio(a, b float64) string {
	switch {
	case a <= 0 || b <= 0:
		return "-"
	case a/b < 10:
		return fmt.Sprintf("%.1f×", a/b)
	}
	return fmt.Sprintf("%.0f×", a/b)
}

// human formats a rate to three significant figures: 950, 5k, 12.5k, 1.2M.
func human(x float64) string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
	switch {
	case x >= 1e6:
		return g(x/1e6) + "M"
	case x >= 1e3:
		return g(x/1e3) + "k"
	}
	return g(float64(int(x)))
}

// behind is the replays+resyncs column: "?" when /metrics did not answer.
func behind(p Point) string {
	if p.Replays < 0 || p.Resyncs < 0 {
		return "?"
	}
	return strconv.FormatFloat(p.Replays+p.Resyncs, 'f', 0, 64)
}

// saturated names which side could not keep up at a point (more than 1 %
// of its requests failed, or it answered under 90 % of the offered rate):
// there the latency is a queue's and the ratio says little.
func saturated(p Point) string {
	sat := func(s Stats) bool {
		return s.Scheduled == 0 || float64(s.Errors) > 0.01*float64(s.Scheduled) || s.Throughput < 0.9*p.Rate
	}
	switch f, k := sat(p.Floor), sat(p.Router); {
	case f && k:
		return "both"
	case f:
		return "floor"
	case k:
		return "kvrouter"
	}
	return "no"
}
