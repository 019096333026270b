package service

import (
	"fmt"
	"io"
	"strings"

	"github.com/kvrouter/kvrouter/actors/routing"
)

// Pending selections on /metrics: an advisory selection made with an id
// (POST /select with selection_id) is remembered by its namespace's route
// actor until a replay-form POST /reservations books it, its TTL passes,
// or the table is full and it is the oldest (routing.Pending). These
// series say whether clients book what they selected: a growing missed
// or expired count means reservations arrive late or name ids never
// selected; evicted means the table is too small for the selection rate.

// pendingFamilies are the per-namespace counters PendingSelections
// writes: name, help, and the figure of routing.PendingStats it reads.
var pendingFamilies = []struct {
	name, help string
	value      func(routing.PendingStats) uint64
}{
	{"kvrouter_pending_selections_remembered_total", "Advisory selections made with an id and remembered for a later reservation (POST /select with selection_id; a re-used id replaces its entry).",
		func(s routing.PendingStats) uint64 { return s.Remembered }},
	{"kvrouter_pending_selections_taken_total", "Reservations booked from a pending selection (POST /reservations, replay form).",
		func(s routing.PendingStats) uint64 { return s.Taken }},
	{"kvrouter_pending_selections_missed_total", "Replay-form reservations whose selection id was not pending (never selected, expired, evicted or already booked).",
		func(s routing.PendingStats) uint64 { return s.Missed }},
	{"kvrouter_pending_selections_expired_total", "Pending selections dropped unbooked at their TTL.",
		func(s routing.PendingStats) uint64 { return s.Expired }},
	{"kvrouter_pending_selections_evicted_total", "Pending selections dropped unbooked, oldest first, to make room in a full table.",
		func(s routing.PendingStats) uint64 { return s.Evicted }},
}

// PendingSelections writes, in the Prometheus text format, each
// namespace's pending-selection counters (pendingFamilies) and the
// entries held now (kvrouter_pending_selections{model,tenant}), labelled
// by model and tenant (the API's routing_group). One request per
// namespace to its route actor; a route actor that does not answer in
// time fails the scrape, as the booked loads do.
func (s *Service) PendingSelections(w io.Writer) error {
	type row struct {
		model, tenant string
		r             *routing.PendingStatsReply
	}
	var rows []row
	for _, ns := range s.sortedSpaces() {
		r, err := request[*routing.PendingStatsReply](s, ns.route, &routing.PendingStatsRequest{})
		if err != nil {
			return fmt.Errorf("pending selections of %s/%s: %w", ns.key.model, ns.key.tenant, err)
		}
		rows = append(rows, row{labelValue.Replace(ns.key.model), labelValue.Replace(ns.key.tenant), r})
	}
	var b strings.Builder
	for _, f := range pendingFamilies {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", f.name, f.help, f.name)
		for _, r := range rows {
			fmt.Fprintf(&b, "%s{model=\"%s\",tenant=\"%s\"} %d\n", f.name, r.model, r.tenant, f.value(r.r.Stats))
		}
	}
	b.WriteString("# HELP kvrouter_pending_selections Pending selections held now (expired ones not yet dropped included).\n" +
		"# TYPE kvrouter_pending_selections gauge\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "kvrouter_pending_selections{model=\"%s\",tenant=\"%s\"} %d\n", r.model, r.tenant, r.r.Held)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
