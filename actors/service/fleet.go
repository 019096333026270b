package service

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// What the fleet page reads besides /workers and /loads (api.FleetReader):
// the latest routing decisions (actors/decisionlog: a bounded, lossy ring
// the route path writes without waiting).

var _ api.FleetReader = (*Service)(nil)

// Decisions implements api.FleetReader.
func (s *Service) Decisions(context.Context) (api.DecisionLog, error) {
	return s.decisions.Snapshot(), nil
}

// recordDecision keeps one answered route in the decision log (lossy: it
// never waits).
func (s *Service) recordDecision(ns *namespace, isl int, logit float64, out *api.RouteResult) {
	s.decisions.Record(api.Decision{At: time.Now(), ModelName: ns.key.model, TenantID: ns.key.tenant, PromptTokens: isl,
		WorkerID: out.WorkerID, DpRank: out.DpRank, OverlapBlocks: out.OverlapBlocks, CachedTokens: out.CachedTokens,
		SessionCreditBlocks: out.SessionCreditBlocks, Logit: logit, Degraded: out.Degraded}, out.Scores)
}

// WorkerInfo writes kvrouter_worker_info{worker,dp_rank,model,tenant} 1
// for every registered stream, in the Prometheus text format: the join
// that lets a dashboard pick the workers of a model (the per-stream
// metrics carry worker and dp_rank only). Its series are bounded by the
// registrations, like every per-stream metric.
func (s *Service) WorkerInfo(w io.Writer) error {
	s.mu.Lock()
	type info struct {
		key           messages.WorkerKey
		model, tenant string
	}
	rows := make([]info, 0, len(s.workers))
	for k, wk := range s.workers {
		rows = append(rows, info{k, wk.ns.key.model, wk.ns.key.tenant})
	}
	s.mu.Unlock()
	slices.SortFunc(rows, func(a, b info) int {
		return cmp.Or(cmp.Compare(a.key.Worker, b.key.Worker), cmp.Compare(a.key.DpRank, b.key.DpRank))
	})
	var b strings.Builder
	b.WriteString("# HELP kvrouter_worker_info 1 for each registered stream, labelled with its namespace (model, tenant).\n" +
		"# TYPE kvrouter_worker_info gauge\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "kvrouter_worker_info{worker=\"%d\",dp_rank=\"%d\",model=\"%s\",tenant=\"%s\"} 1\n",
			r.key.Worker, r.key.DpRank, labelValue.Replace(r.model), labelValue.Replace(r.tenant))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// labelValue escapes a label value for the Prometheus text format.
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
