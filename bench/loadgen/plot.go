package loadgen

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots draws the report's figures as PNG files in dir (created if
// needed) and returns their paths: latency.png (route latency p50 and p99
// against the offered rate, per transport, worker count and shard count)
// when the report has a sweep, and hitrate-<trace>.png (hit rate against
// workers, per policy; kvrouter with the first shard count) for each trace
// with quality rows.
func WritePlots(r *Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	if len(r.Sweep) > 0 {
		path := filepath.Join(dir, "latency.png")
		if err := latencyPlot(r.Sweep, path); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	for _, trace := range r.Config.Traces {
		rows := slices.DeleteFunc(slices.Clone(r.Quality), func(q QualityRow) bool {
			return q.Trace != trace || q.Hosts > 1 || (q.Shards != 0 && len(r.Config.Shards) > 0 && q.Shards != r.Config.Shards[0])
		})
		if len(rows) == 0 {
			continue
		}
		path := filepath.Join(dir, "hitrate-"+trace+".png")
		if err := hitRatePlot(trace, rows, path); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	return out, nil
}

func latencyPlot(points []SweepPoint, path string) error {
	p := plot.New()
	p.Title.Text = "kvrouter /route latency vs offered rate"
	p.X.Label.Text = "offered route requests/s"
	p.Y.Label.Text = "latency (µs)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	type key struct {
		transport              string
		workers, shards, hosts int
	}
	series := map[key][]SweepPoint{}
	for _, pt := range points {
		k := key{pt.Transport, pt.Workers, pt.Shards, pt.Hosts}
		series[k] = append(series[k], pt)
	}
	keys := make([]key, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.transport, b.transport), cmp.Compare(a.workers, b.workers), cmp.Compare(a.hosts, b.hosts),
			cmp.Compare(a.shards, b.shards))
	})
	var lines []any
	for _, k := range keys {
		for _, q := range []struct {
			name string
			val  func(Latency) float64
		}{{"p50", func(l Latency) float64 { return l.P50 }}, {"p99", func(l Latency) float64 { return l.P99 }}} {
			var xys plotter.XYs
			for _, pt := range series[k] {
				if v := q.val(pt.Latency); v > 0 {
					xys = append(xys, plotter.XY{X: pt.Offered, Y: v})
				}
			}
			if len(xys) > 0 {
				where := fmt.Sprintf("%d shards", k.shards)
				if k.hosts > 1 {
					where = fmt.Sprintf("%d hosts", k.hosts)
				}
				lines = append(lines, fmt.Sprintf("%s, %d workers, %s, %s", k.transport, k.workers, where, q.name), xys)
			}
		}
	}
	if len(lines) == 0 {
		return fmt.Errorf("loadgen: no sweep point has a latency to plot")
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

func hitRatePlot(trace string, rows []QualityRow, path string) error {
	p := plot.New()
	p.Title.Text = "prefix hit rate vs workers (" + trace + " trace)"
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "hit rate (% of prompt tokens)"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	p.Legend.Top = true
	byPolicy := map[string]plotter.XYs{}
	var names []string
	for _, q := range rows {
		if _, ok := byPolicy[q.Policy]; !ok {
			names = append(names, q.Policy)
		}
		byPolicy[q.Policy] = append(byPolicy[q.Policy], plotter.XY{X: float64(q.Workers), Y: 100 * q.HitRate})
	}
	var lines []any
	for _, n := range names {
		xys := byPolicy[n]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		lines = append(lines, n, xys)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
