package pinned

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the ingest report: how processes were placed and how
// loaded the machine was, then one row per offered rate.
func (r *IngestReport) WriteTable(w io.Writer) error {
	c := r.Config
	place := fmt.Sprintf("router on cpu %d; %d replay publishers on cpu %d (taskset)", c.RouterCPU, c.Publishers, c.LoadCPU)
	if r.Pinning != "" {
		place = r.Pinning
	}
	fmt.Fprintf(w, "pinned ingest: ZeroMQ → listener → normalizer → coalescer → index, out of process; %s\n", place)
	fmt.Fprintf(w, "nice %d; %d cpus, load average %s → %s; %v per point after %v warm-up; %s at %d tokens per block, %d blocks pre-encoded per publisher (caches of %d), PUB hwm %d; router --shards %d\n",
		c.Nice, r.CPUs, r.LoadBefore, r.LoadAfter, c.Duration, c.Warmup, c.Trace, c.TokensPerBlock, c.PreEncode, c.Capacity, c.HWM, c.Shards)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "offered\tsent blocks/s\tapplied blocks/s\tapplied/sent\trouter cpu\tcpu-s per M blocks\tM blocks per cpu-s\tgaps\treplays\tresyncs\tdropped\tkept up\t")
	for _, p := range r.Points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", offered(p.Offered), human(p.Sent), known(p.Applied, human),
			share(p.Applied, p.Sent), share(p.RouterCPU, p.Wall), known(p.cpuPerMillion(), secs), known(p.perCPUSecond(), millions),
			count(p.Gaps), count(p.Replays), count(p.Resyncs), count(p.Dropped), p.keptUp())
	}
	return tw.Flush()
}

// cpuPerMillion is the router's CPU seconds per million applied blocks
// (-1 unknown).
func (p IngestPoint) cpuPerMillion() float64 {
	if p.RouterCPU < 0 || p.Applied <= 0 {
		return -1
	}
	return p.RouterCPU / (p.Applied * p.Wall / 1e6)
}

// perCPUSecond is the applied blocks per second of router CPU: what the
// router would apply with its core to itself (-1 unknown).
func (p IngestPoint) perCPUSecond() float64 {
	if c := p.cpuPerMillion(); c > 0 {
		return 1e6 / c
	}
	return -1
}

// keptUp says whether the router took what was sent: it applied at least
// 95 % of the blocks/s sent, and repaired no gap and dropped no state.
// "?" when its counters are unknown.
func (p IngestPoint) keptUp() string {
	switch {
	case p.Applied < 0 || p.Gaps < 0:
		return "?"
	case p.Applied >= 0.95*p.Sent && p.Gaps == 0 && p.Replays == 0 && p.Resyncs == 0 && p.Dropped == 0:
		return "yes"
	}
	return "no"
}

// brief is a progress line's summary of a point.
func (p IngestPoint) brief() string {
	return fmt.Sprintf("sent %s, applied %s blocks/s, router cpu %s (%s per M blocks), gaps %s replays %s resyncs %s dropped %s, kept up %s",
		human(p.Sent), known(p.Applied, human), share(p.RouterCPU, p.Wall), known(p.cpuPerMillion(), secs),
		count(p.Gaps), count(p.Replays), count(p.Resyncs), count(p.Dropped), p.keptUp())
}

// offered names an offered rate; 0 is flat out.
func offered(rate float64) string {
	if rate == 0 {
		return "max"
	}
	return human(rate)
}

// known formats x with f, "?" when negative (unknown).
func known(x float64, f func(float64) string) string {
	if x < 0 {
		return "?"
	}
	return f(x)
}

// share is a/b as a percentage ("?" when unknown).
func share(a, b float64) string {
	if a < 0 || b <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

func secs(x float64) string     { return fmt.Sprintf("%.2fs", x) }
func millions(x float64) string { return fmt.Sprintf("%.2f", x/1e6) }

// count formats a counter delta ("?" when unknown).
func count(x float64) string {
	return known(x, func(v float64) string { return fmt.Sprintf("%.0f", v) })
}
