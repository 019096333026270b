package service

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// Engine signals (actors/enginesignals): when Config.Signals is set, every
// registered rank with a metrics endpoint (its registration's
// metrics_endpoint, else its serving endpoint's /metrics) is scraped;
// every state tick (stateEvery) the latest observations become the route
// actors' candidates' Reported load and saturation, and /workers and
// /metrics show them.

// SignalsConfig turns engine signals on (Config.Signals).
type SignalsConfig struct {
	// Scrape configures the scraper (zero fields: its defaults).
	Scrape enginesignals.Config
	// Thresholds define saturation (zero fields: the defaults).
	Thresholds enginesignals.Thresholds
}

// Outside traffic is flagged in /workers when the engine reports at least
// outsideMinRequests requests beyond what the router booked, and at least
// half as many as it booked: a third or more of its load came from
// elsewhere.
const outsideMinRequests = 2

// startSignals starts the scraper (Config.Signals set).
func (s *Service) startSignals() error {
	c := *s.cfg.Signals
	c.Thresholds = c.Thresholds.WithDefaults()
	if err := c.Thresholds.Check(); err != nil {
		return fmt.Errorf("service: %w", err)
	}
	s.cfg.Signals = &c
	s.scraper = enginesignals.NewScraper(c.Scrape)
	return nil
}

// metricsURL is where a registration's engine serves its metrics ("" when
// it names neither a metrics nor a serving endpoint).
func metricsURL(reg api.Registration) string {
	if reg.MetricsEndpoint != "" {
		return reg.MetricsEndpoint
	}
	ep, err := serving.Parse(reg.ServingEndpoint)
	if reg.ServingEndpoint == "" || err != nil {
		return ""
	}
	if reg.Engine == enginesignals.TRTLLM {
		return ep.BaseURL() + "/prometheus/metrics" // trtllm-serve's path
	}
	return ep.BaseURL() + "/metrics"
}

// followSignals points the scraper at the registered ranks and takes its
// latest observations. Called with s.mu held, before the candidates are
// synced.
func (s *Service) followSignals() {
	if s.scraper == nil {
		return
	}
	targets := make([]enginesignals.Target, 0, len(s.workers))
	for k, w := range s.workers {
		if u := metricsURL(w.reg); u != "" {
			e := w.reg.Engine
			if e == engine.Auto || e == "" {
				e = enginesignals.Auto
			}
			targets = append(targets, enginesignals.Target{Key: k, URL: u, Engine: e})
		}
	}
	s.scraper.Set(targets)
	s.observed = s.scraper.Snapshot()
}

// reported is a rank's Reported load for the route actor, in the
// namespace's blocks of bs tokens (zero when the rank is not scraped).
func (s *Service) reported(k messages.WorkerKey, bs int, now time.Time) routing.Reported {
	o, ok := s.observed[k]
	if !ok {
		return routing.Reported{}
	}
	stale := o.Stale(now, s.cfg.Signals.Scrape.WithDefaults().StaleAfter)
	// Never scraped (Seq 0): no load to add, but past StaleAfter
	// saturated (fail closed).
	r := routing.Reported{Seq: o.Seq, Saturated: s.cfg.Signals.Thresholds.Saturation(o.Signals, stale) != ""}
	if o.Seq == 0 {
		return r
	}
	sig := o.Signals
	r.Waiting, r.Running = int64(sig.Waiting), int64(sig.Running)
	if l := sig.Lora; l != nil {
		r.Lora = routing.LoraSlots{Known: true, Running: l.Running, Waiting: l.Waiting, Max: l.Max}
	}
	if sig.HasKV && sig.TotalBlocks > 0 {
		tokens := sig.KVUsage * float64(sig.TotalBlocks) * float64(cmpOr(sig.BlockSize, int64(bs)))
		r.KVBlocks, r.HasKVBlocks = int64(tokens)/int64(bs), true
	}
	return r
}

func cmpOr(a, b int64) int64 {
	if a > 0 {
		return a
	}
	return b
}

// signalsNow is the scraper's latest observations and every namespace's
// outside load (nil when signals are off).
func (s *Service) signalsNow() (map[messages.WorkerKey]enginesignals.Observation, map[messages.WorkerKey]routing.OutsideLoad) {
	if s.scraper == nil {
		return nil, nil
	}
	return s.scraper.Snapshot(), s.outsideLoads()
}

// outsideLoads asks every namespace's route actor for its candidates'
// outside load (routing.OutsideRequest); a route actor that does not
// answer in time is left out.
func (s *Service) outsideLoads() map[messages.WorkerKey]routing.OutsideLoad {
	out := map[messages.WorkerKey]routing.OutsideLoad{}
	for _, ns := range s.sortedSpaces() {
		r, err := request[*routing.OutsideReply](s, ns.route, &routing.OutsideRequest{})
		if err != nil {
			continue
		}
		for _, o := range r.Ranks {
			out[o.Key] = o
		}
	}
	return out
}

// signalsInfo is a rank's signals in /workers (nil when not scraped).
func (s *Service) signalsInfo(k messages.WorkerKey, obs map[messages.WorkerKey]enginesignals.Observation,
	outside map[messages.WorkerKey]routing.OutsideLoad, now time.Time) *api.EngineSignals {
	o, ok := obs[k]
	if !ok {
		return nil
	}
	sc := s.cfg.Signals.Scrape.WithDefaults()
	stale := o.Stale(now, sc.StaleAfter)
	info := &api.EngineSignals{URL: o.URL, Engine: o.Signals.Engine, Scrapes: o.Seq, LastError: o.LastError,
		StaleEvents: o.StaleEvents, Saturated: s.cfg.Signals.Thresholds.Saturation(o.Signals, stale)}
	for i, r := range enginesignals.Reasons {
		if n := o.Failures[i]; n > 0 {
			if info.Failures == nil {
				info.Failures = map[string]uint64{}
			}
			info.Failures[string(r)] = n
		}
	}
	if o.Seq > 0 {
		sig := o.Signals
		age := now.Sub(o.At).Seconds()
		info.AgeSeconds = &age
		if sig.HasLoad {
			info.Waiting, info.Running = &sig.Waiting, &sig.Running
		}
		if sig.HasKV {
			info.KVUsage, info.KVUsageMetric = &sig.KVUsage, sig.KVUsageName
		}
		info.TotalBlocks = sig.TotalBlocks
		if sig.Lora != nil {
			info.RunningAdapters, info.MaxLora = sig.Lora.Running, sig.Lora.Max
		}
	}
	if ol, ok := outside[k]; ok {
		info.OutsideRequests, info.OutsideBlocks, info.BookedRequests = ol.Outside.Requests, ol.Outside.Blocks, ol.Booked.Requests
		info.OutsideTraffic = ol.Outside.Requests >= outsideMinRequests && 2*ol.Outside.Requests >= ol.Booked.Requests
	}
	return info
}

// WriteSignalMetrics writes the engine signals' metrics in the Prometheus
// text format (nothing when signals are off): per (worker, dp_rank), the
// scrapes by result, the stale episodes, the reported gauges and
// prefix-cache counters, saturation and the outside load the cost adds.
func (s *Service) WriteSignalMetrics(w io.Writer) error {
	if s.scraper == nil {
		return nil
	}
	obs, outside := s.signalsNow()
	now := time.Now()
	keys := slices.SortedFunc(maps.Keys(obs), compareKeys)
	stale := s.cfg.Signals.Scrape.WithDefaults().StaleAfter
	var sb strings.Builder
	family := func(name, typ, help string, each func(k messages.WorkerKey, o *enginesignals.Observation, lbl string)) {
		fmt.Fprintf(&sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, k := range keys {
			o := obs[k]
			each(k, &o, fmt.Sprintf(`worker="%d",dp_rank="%d"`, k.Worker, k.DpRank))
		}
	}
	family("kvrouter_engine_scrapes_total", "counter", "Scrapes of the engines' metrics, by result (ok or a failure reason).",
		func(_ messages.WorkerKey, o *enginesignals.Observation, l string) {
			fmt.Fprintf(&sb, "kvrouter_engine_scrapes_total{%s,result=\"ok\"} %d\n", l, o.Seq)
			for i, r := range enginesignals.Reasons {
				fmt.Fprintf(&sb, "kvrouter_engine_scrapes_total{%s,result=%q} %d\n", l, r, o.Failures[i])
			}
		})
	family("kvrouter_engine_stale_total", "counter", "Times an engine's signals went stale (no successful scrape within the staleness threshold).",
		func(_ messages.WorkerKey, o *enginesignals.Observation, l string) {
			fmt.Fprintf(&sb, "kvrouter_engine_stale_total{%s} %d\n", l, o.StaleEvents)
		})
	family("kvrouter_engine_saturated", "gauge", "1 when the engine is saturated (queue or KV usage over the thresholds, or stale signals), by reason.",
		func(_ messages.WorkerKey, o *enginesignals.Observation, l string) {
			why := s.cfg.Signals.Thresholds.Saturation(o.Signals, o.Stale(now, stale))
			for _, r := range []string{enginesignals.SaturatedQueue, enginesignals.SaturatedKV, enginesignals.SaturatedStale} {
				fmt.Fprintf(&sb, "kvrouter_engine_saturated{%s,reason=%q} %d\n", l, r, b2i(why == r))
			}
		})
	family("kvrouter_engine_reported_requests", "gauge", "Requests the engine reports, by state (waiting, running).",
		func(_ messages.WorkerKey, o *enginesignals.Observation, l string) {
			if o.Signals.HasLoad {
				fmt.Fprintf(&sb, "kvrouter_engine_reported_requests{%s,state=\"waiting\"} %g\n", l, o.Signals.Waiting)
				fmt.Fprintf(&sb, "kvrouter_engine_reported_requests{%s,state=\"running\"} %g\n", l, o.Signals.Running)
			}
		})
	family("kvrouter_engine_reported_kv_usage_ratio", "gauge", "The share of its KV cache the engine reports in use.",
		func(_ messages.WorkerKey, o *enginesignals.Observation, l string) {
			if o.Signals.HasKV {
				fmt.Fprintf(&sb, "kvrouter_engine_reported_kv_usage_ratio{%s} %g\n", l, o.Signals.KVUsage)
			}
		})
	family("kvrouter_engine_reported_prefix_cache_tokens_total", "counter", "The engine's own prefix-cache counters, in tokens, by kind (queries: prompt tokens looked up; hits: found cached), relayed as it reports them (they restart with the engine).",
		func(_ messages.WorkerKey, o *enginesignals.Observation, l string) {
			if o.Signals.HasPrefix {
				fmt.Fprintf(&sb, "kvrouter_engine_reported_prefix_cache_tokens_total{%s,kind=\"queries\"} %g\n", l, o.Signals.PrefixQueries)
				fmt.Fprintf(&sb, "kvrouter_engine_reported_prefix_cache_tokens_total{%s,kind=\"hits\"} %g\n", l, o.Signals.PrefixHits)
			}
		})
	family("kvrouter_engine_outside_requests", "gauge", "Requests the engine reported beyond what the router had booked on it (traffic from elsewhere), as the cost adds them.",
		func(k messages.WorkerKey, _ *enginesignals.Observation, l string) {
			fmt.Fprintf(&sb, "kvrouter_engine_outside_requests{%s} %d\n", l, outside[k].Outside.Requests)
		})
	_, err := io.WriteString(w, sb.String())
	return err
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
