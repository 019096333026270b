package service

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// The fleet's figures that the telemetry package's per-shard readings
// cannot carry, written in the Prometheus text format at each scrape: the
// booked load per stream (GET /loads) and the index blocks per stream and
// per namespace (what GET /workers and the fleet page show).

// bookedFamilies are the per-rank series BookedLoads writes: name, help,
// and the figure of an api.PotentialLoad it reads.
var bookedFamilies = []struct {
	name, help string
	value      func(api.PotentialLoad) uint64
}{
	{"kvrouter_worker_booked_requests", "Requests the router has booked on each stream and not yet freed (GET /loads active_requests).",
		func(l api.PotentialLoad) uint64 { return l.ActiveRequests }},
	{"kvrouter_worker_booked_prefill_tokens", "Prompt tokens still to prefill the router has booked on each stream (GET /loads potential_prefill_tokens).",
		func(l api.PotentialLoad) uint64 { return l.PotentialPrefillTokens }},
	{"kvrouter_worker_booked_decode_blocks", "KV blocks of the decoding requests the router has booked on each stream (GET /loads potential_decode_blocks).",
		func(l api.PotentialLoad) uint64 { return l.PotentialDecodeBlocks }},
}

// BookedLoads writes, in the Prometheus text format, the load the router
// has booked on each routable stream (worker, dp_rank), idle ones at 0:
// the figures of GET /loads, which the cost function weighs against cache
// overlap. It reads one answer per namespace from its route actor, so a
// scrape costs as much as one GET /loads. In a cluster the figures
// include the load other hosts booked (every host shows the same totals:
// aggregate with max, not sum). The model of a stream comes from
// kvrouter_worker_info.
func (s *Service) BookedLoads(w io.Writer) error {
	spaces, err := s.Loads(context.Background(), api.LoadsFilter{})
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, f := range bookedFamilies {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", f.name, f.help, f.name)
		for _, ns := range spaces {
			for _, l := range ns.Loads {
				fmt.Fprintf(&b, "%s{worker=\"%d\",dp_rank=\"%d\"} %d\n", f.name, l.WorkerID, l.DpRank, f.value(l))
			}
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// IndexBlocks writes the blocks each namespace's index holds
// (kvrouter_namespace_index_blocks{model,tenant}: tree nodes summed over
// the shards, as kvrouter_index_blocks{shard} counts them over every
// namespace) and each registered stream's
// (kvrouter_worker_index_blocks{worker,dp_rank}: what /workers shows, 0
// before its first stored block). A stream whose worker publishes no
// events has no series here: its blocks are the route actor's
// predictions, not index entries. One index request per namespace, as
// the per-shard readings already make.
func (s *Service) IndexBlocks(w io.Writer) error {
	s.mu.Lock()
	streams := map[*namespace][]messages.WorkerKey{}
	for k, wk := range s.workers {
		if !wk.reg.EventLess() {
			streams[wk.ns] = append(streams[wk.ns], k)
		}
	}
	s.mu.Unlock()
	type row struct {
		key    messages.WorkerKey
		blocks int
	}
	var rows []row
	var b strings.Builder
	b.WriteString("# HELP kvrouter_namespace_index_blocks Blocks held by each namespace's index (model, tenant), summed over its shards.\n" +
		"# TYPE kvrouter_namespace_index_blocks gauge\n")
	for _, ns := range s.sortedSpaces() {
		ix, err := ns.pipe.IndexStats(s.cfg.Timeout)
		if err != nil {
			return fmt.Errorf("index of %s/%s: %w", ns.key.model, ns.key.tenant, err)
		}
		fmt.Fprintf(&b, "kvrouter_namespace_index_blocks{model=\"%s\",tenant=\"%s\"} %d\n",
			labelValue.Replace(ns.key.model), labelValue.Replace(ns.key.tenant), ix.Size.Blocks)
		for _, k := range streams[ns] {
			rows = append(rows, row{k, ix.TreeSizes[k]})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return compareKeys(a.key, b.key) })
	b.WriteString("# HELP kvrouter_worker_index_blocks Blocks the index holds for each registered stream.\n" +
		"# TYPE kvrouter_worker_index_blocks gauge\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "kvrouter_worker_index_blocks{worker=\"%d\",dp_rank=\"%d\"} %d\n", r.key.Worker, r.key.DpRank, r.blocks)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
