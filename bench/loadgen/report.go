package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is everything one `kvrouter-bench` run measured.
type Report struct {
	Mode    string         `json:"mode"`
	Machine Machine        `json:"machine"`
	Config  ReportConfig   `json:"config"`
	Ingest  []IngestResult `json:"ingest"`
	Sweep   []SweepPoint   `json:"sweep"`
	Memory  []MemoryResult `json:"memory"`
	Quality []QualityRow   `json:"quality"`
	Notes   []string       `json:"notes,omitempty"`
	Seconds float64        `json:"seconds"`
}

// Machine is where a report was measured.
type Machine struct {
	CPUs      int    `json:"nproc"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	Date      string `json:"date"`
}

// ReportConfig is the part of Config a reader needs to rerun the figures.
type ReportConfig struct {
	Traces            []string  `json:"traces"`
	TokensPerBlock    int       `json:"tokens_per_block"`
	Requests          int       `json:"requests"`
	Capacity          int       `json:"capacity_blocks"`
	InFlightPerWorker int       `json:"in_flight_per_worker"`
	Shards            []int     `json:"shards"`
	Hosts             []int     `json:"hosts"`
	OverlapWeights    []float64 `json:"overlap_weights"`
	Temperature       float64   `json:"temperature"`
	SessionCredit     float64   `json:"session_credit"`
	Clients           int       `json:"clients"`
	PointSeconds      float64   `json:"point_seconds"`
	Feed              string    `json:"feed"`
	// EventDelay labels the quality replays' event-delay model
	// (EventDelay.Label: "prefill+20ms" or "none").
	EventDelay string `json:"event_delay"`
}

// IngestResult is the ingest phase on one trace.
type IngestResult struct {
	Trace         string  `json:"trace"`
	Workers       int     `json:"workers"`
	Shards        int     `json:"shards"`
	Hosts         int     `json:"hosts"` // routers (1: no cluster)
	Requests      int     `json:"requests"`
	StoredBlocks  int     `json:"stored_blocks"`
	RemovedBlocks int     `json:"removed_blocks"`
	Events        int     `json:"events"`
	Seconds       float64 `json:"seconds"`
	BlocksPerSec  float64 `json:"blocks_per_s"`
	EventsPerSec  float64 `json:"events_per_s"`
	Lag           Latency `json:"lag"`
	LagTimeouts   int     `json:"lag_timeouts"`
	Valid         bool    `json:"valid"`
	Invalid       string  `json:"invalid,omitempty"`
}

// SweepPoint is one offered rate of the route-latency sweep.
type SweepPoint struct {
	Trace     string  `json:"trace"`
	Transport string  `json:"transport"` // "in-process" or "http"
	Workers   int     `json:"workers"`
	Shards    int     `json:"shards"`
	Hosts     int     `json:"hosts"` // routers (1: no cluster)
	Offered   float64 `json:"offered_per_s"`
	Achieved  float64 `json:"achieved_per_s"`
	Requests  int     `json:"requests"`
	Errors    int     `json:"errors"`
	// Dropped counts routed requests not served because their engine's
	// queue was full (async feed: the engines fell behind).
	Dropped int     `json:"serves_dropped"`
	Latency Latency `json:"latency"`
	Lag     Latency `json:"lag"`
	// SchedP99 is the p99 in µs of the Go runtime's scheduling latency
	// (time a runnable goroutine waited for a CPU) during the point.
	SchedP99  float64 `json:"sched_p99_us"`
	Saturated bool    `json:"saturated"`
	Valid     bool    `json:"valid"`
	Invalid   string  `json:"invalid,omitempty"`
}

// MemoryResult is the router's heap per index entry at the end of a
// kvrouter replay.
type MemoryResult struct {
	Trace         string  `json:"trace"`
	Workers       int     `json:"workers"`
	Shards        int     `json:"shards"`
	Hosts         int     `json:"hosts"` // routers (1: no cluster)
	Entries       int     `json:"entries"`
	HeapBytes     int64   `json:"heap_bytes"`       // the router's heap at the end of the replay
	FixedBytes    int64   `json:"fixed_heap_bytes"` // an empty router's, same workers
	BytesPerEntry float64 `json:"bytes_per_entry"`  // (heap − fixed) / entries
}

// QualityRow is one policy's routing quality on one trace and worker count.
type QualityRow struct {
	Trace   string `json:"trace"`
	Workers int    `json:"workers"`
	Shards  int    `json:"shards"`
	Hosts   int    `json:"hosts"` // routers (1: no cluster)
	Policy  string `json:"policy"`
	// OverlapWeight is the routing cost's overlap weight (kvrouter rows).
	OverlapWeight float64 `json:"overlap_weight,omitempty"`
	Requests      int     `json:"requests"`
	HitRate       float64 `json:"hit_rate"`
	OfBound       float64 `json:"of_clairvoyant"` // HitRate / the clairvoyant's
	RequestCoV    float64 `json:"request_cov"`
	PrefillCoV    float64 `json:"prefill_cov"`
	// TTFTMeanMs and TTFTP99Ms summarise the engine model's time to first
	// token (fleet.go; 0 for the clairvoyant bound, which has no fleet).
	TTFTMeanMs float64 `json:"ttft_mean_ms"`
	TTFTP99Ms  float64 `json:"ttft_p99_ms"`
	// Outside labels an outside-load replay (outside.go; "" otherwise);
	// OutsideTTFT* summarise its outside requests' TTFT estimate.
	Outside           string  `json:"outside,omitempty"`
	OutsideTTFTMeanMs float64 `json:"outside_ttft_mean_ms,omitempty"`
	OutsideTTFTP99Ms  float64 `json:"outside_ttft_p99_ms,omitempty"`
	Route             Latency `json:"route_latency,omitzero"`
	// Partial counts route answers that lacked part of the index (a
	// cluster: shard grains that missed the route deadline).
	Partial int     `json:"partial_answers,omitempty"`
	Lag     Latency `json:"lag,omitzero"`
	Tally   Tally   `json:"tally"`
	// Valid is false when the replay fell behind (kvrouter rows only: the
	// others run offline).
	Valid   bool   `json:"valid"`
	Invalid string `json:"invalid,omitempty"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned text tables, one per section.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	m := r.Machine
	fmt.Fprintf(w, "kvrouter-bench (%s) — %d CPUs, %s, %s, %s, %.0f s\n", r.Mode, m.CPUs, m.CPUModel, m.GoVersion, m.Date, r.Seconds)
	if len(r.Ingest) > 0 {
		fmt.Fprintln(w, "\nIngest (simulated engines → ZeroMQ → pipeline → index, engines on the same cores)")
		fmt.Fprintln(tw, "trace\tworkers\tshards\thosts\trequests\tstored blocks\tblocks/s\tevents/s\tlag p50 µs\tlag p99 µs\tlag p99.9 µs\tvalid\t")
		for _, x := range r.Ingest {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Trace, x.Workers, x.Shards, x.Hosts, x.Requests, x.StoredBlocks,
				si(x.BlocksPerSec), si(x.EventsPerSec), lagUs(x.Lag, x.Lag.P50), lagUs(x.Lag, x.Lag.P99), lagUs(x.Lag, x.Lag.P999), validity(x.Valid, x.Invalid))
		}
		tw.Flush()
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintf(w, "\nRoute latency, open-loop sweep (latency from release at the offered pace; feed %s: %s)\n", r.Config.Feed, feedNote[r.Config.Feed])
		fmt.Fprintln(tw, "transport\tworkers\tshards\thosts\toffered/s\tachieved/s\terrors\tp50 µs\tp99 µs\tp99.9 µs\tlag p99 µs\tsched p99 µs\tstate\t")
		for _, x := range r.Sweep {
			state := validity(x.Valid, x.Invalid)
			if x.Saturated {
				state = "saturated; " + state
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Transport, x.Workers, x.Shards, x.Hosts, si(x.Offered), si(x.Achieved),
				x.Errors, us(x.Latency.P50), us(x.Latency.P99), us(x.Latency.P999), lagUs(x.Lag, x.Lag.P99), us(x.SchedP99), state)
		}
		tw.Flush()
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w, "\nMemory (router heap released when the router closes, less an empty router's, over index entries)")
		fmt.Fprintln(tw, "trace\tworkers\tshards\thosts\tentries\theap MiB\tempty MiB\tB/entry\t")
		for _, x := range r.Memory {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.0f\t\n", x.Trace, x.Workers, x.Shards, x.Hosts, x.Entries,
				float64(x.HeapBytes)/(1<<20), float64(x.FixedBytes)/(1<<20), x.BytesPerEntry)
		}
		tw.Flush()
	}
	if len(r.Quality) > 0 {
		fmt.Fprintf(w, "\nRouting quality (hit rate = cached prompt tokens / prompt tokens, as the serving engine saw it; event delay %s)\n", r.Config.EventDelay)
		fmt.Fprintln(tw, "trace\tworkers\tshards\thosts\tpolicy\trequests\thit rate\tof bound\trequest CoV\tprefill CoV\tTTFT est mean ms\tTTFT est p99 ms\troute p99 µs\tlag p99 µs\tvalid\t")
		for _, x := range r.Quality {
			route, lag, ttft, ttft99 := "-", "-", "-", "-"
			if x.TTFTMeanMs > 0 {
				ttft, ttft99 = fmt.Sprintf("%.1f", x.TTFTMeanMs), fmt.Sprintf("%.1f", x.TTFTP99Ms)
			}
			if x.Route.N > 0 {
				route = us(x.Route.P99)
			}
			if x.Lag.N > 0 {
				lag = us(x.Lag.P99)
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%.1f%%\t%.1f%%\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t\n", x.Trace, x.Workers, x.Shards, x.Hosts, x.Policy, x.Requests,
				100*x.HitRate, 100*x.OfBound, x.RequestCoV, x.PrefillCoV, ttft, ttft99, route, lag, validity(x.Valid, x.Invalid))
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// si formats a rate with a k or M suffix.
func si(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

// us formats microseconds.
func us(x float64) string {
	if x >= 1000 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// lagUs formats one figure of a lag summary, "-" when nothing was probed.
func lagUs(l Latency, x float64) string {
	if l.N == 0 {
		return "-"
	}
	return us(x)
}

func validity(ok bool, why string) string {
	if ok {
		return "valid"
	}
	return "INVALID: " + strings.TrimSpace(why)
}
