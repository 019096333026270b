package service

// The prediction check (actors/routing/hitcheck) as the service runs it:
// the request path reports what each engine said it served from cache,
// the reported rank's route actor checks its prediction with it, and
// /workers and the metrics show the check. Each router host checks the
// requests its own request path relayed.

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/hitcheck"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// ReportHit hands the engine's reported cached tokens for a request
// routed to r.Key to that rank's route actor (fire and forget); a rank
// no longer registered is ignored.
func (s *Service) ReportHit(r hitcheck.Report) {
	s.mu.Lock()
	w := s.workers[r.Key]
	s.mu.Unlock()
	if w == nil {
		s.hitsUnknown.Add(1)
		return
	}
	s.system.Root.Send(w.ns.route, &routing.HitReport{Report: r})
}

// hitStats reads every namespace's check (a route actor that does not
// answer is left out, counted with the prediction read errors).
func (s *Service) hitStats() (map[messages.WorkerKey]hitcheck.WorkerStats, []*routing.HitStatsReply) {
	byKey := map[messages.WorkerKey]hitcheck.WorkerStats{}
	var reps []*routing.HitStatsReply
	for _, ns := range s.sortedSpaces() {
		rep, err := request[*routing.HitStatsReply](s, ns.route, &routing.HitStatsRequest{})
		if err != nil {
			s.predictionReadErrors.Add(1)
			continue
		}
		reps = append(reps, rep)
		for _, st := range rep.Workers {
			byKey[st.Key] = st
		}
	}
	return byKey, reps
}

// hitCheckInfo is k's check in /workers (nil before any report).
func hitCheckInfo(byKey map[messages.WorkerKey]hitcheck.WorkerStats, k messages.WorkerKey) *api.HitCheckInfo {
	st, ok := byKey[k]
	if !ok {
		return nil
	}
	info := &api.HitCheckInfo{Reports: st.Reports, PredictedTokens: st.PredictedTokens, ReportedTokens: st.ReportedTokens,
		Flagged: st.Flagged, Credit: st.Credit}
	if st.Judged {
		r := st.Ratio
		info.WindowRatio = &r
	}
	return info
}

// WriteHitMetrics writes the prediction check in the Prometheus text
// format: per rank with reports, the cached tokens predicted and reported
// (their ratio over time is the per-worker predicted vs. reported hit
// rate), whether it is flagged and the credit its overlap gets; the
// distribution of (reported − predicted) / prompt tokens; the reports
// dropped (past the tracked-worker cap, or for a rank no longer
// registered).
func (s *Service) WriteHitMetrics(w io.Writer) error {
	byKey, reps := s.hitStats()
	var b strings.Builder
	keys := slices.SortedFunc(maps.Keys(byKey), compareKeys)
	series := []struct {
		name, typ, help string
		value           func(hitcheck.WorkerStats) string
	}{
		{"kvrouter_hit_check_predicted_tokens_total", "counter", "Cached tokens the router predicted at route time for the requests whose engine reported usage, per rank.",
			func(st hitcheck.WorkerStats) string { return fmt.Sprint(st.PredictedTokens) }},
		{"kvrouter_hit_check_reported_tokens_total", "counter", "Cached tokens the engines reported (usage.prompt_tokens_details.cached_tokens) for those requests, per rank.",
			func(st hitcheck.WorkerStats) string { return fmt.Sprint(st.ReportedTokens) }},
		{"kvrouter_hit_check_reports_total", "counter", "Requests whose engine reported its cached tokens, per rank.",
			func(st hitcheck.WorkerStats) string { return fmt.Sprint(st.Reports) }},
		{"kvrouter_hit_check_flagged", "gauge", "1 while a rank's reported hits stay far below the router's predictions (lost events or a hashing mismatch); its overlap is then discounted.",
			func(st hitcheck.WorkerStats) string { return b2s(st.Flagged) }},
		{"kvrouter_hit_check_credit", "gauge", "Share of a rank's overlap the cost credits (1 unless flagged).",
			func(st hitcheck.WorkerStats) string { return fmt.Sprint(st.Credit) }},
	}
	for _, f := range series {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s{worker=\"%d\",dp_rank=\"%d\"} %s\n", f.name, k.Worker, k.DpRank, f.value(byKey[k]))
		}
	}
	var errs [len(hitcheck.ErrorBounds) + 1]uint64
	var errSum float64
	dropped := s.hitsUnknown.Load()
	for _, r := range reps {
		for i, n := range r.Errors {
			errs[i] += n
		}
		errSum += r.ErrorSum
		dropped += int64(r.Dropped)
	}
	const h = "kvrouter_hit_check_error"
	fmt.Fprintf(&b, "# HELP %s (reported − predicted) cached tokens over the prompt's tokens, per reported request: below 0 the engine served less from cache than the router predicted.\n# TYPE %s histogram\n", h, h)
	var cum, count uint64
	for i, bound := range hitcheck.ErrorBounds {
		cum += errs[i]
		fmt.Fprintf(&b, "%s_bucket{le=\"%g\"} %d\n", h, bound, cum)
	}
	count = cum + errs[len(hitcheck.ErrorBounds)]
	fmt.Fprintf(&b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", h, count, h, errSum, h, count)
	fmt.Fprintf(&b, "# HELP kvrouter_hit_check_dropped_total Engine hit reports not checked: past the tracked-rank cap, or for a rank no longer registered.\n# TYPE kvrouter_hit_check_dropped_total counter\nkvrouter_hit_check_dropped_total %d\n", dropped)
	_, err := io.WriteString(w, b.String())
	return err
}

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
