package service

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kvrouter/kvrouter/messages/api"
)

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
