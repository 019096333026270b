package requestpath

import (
	"cmp"
	"net"
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// Candidate is one rank a request may be sent to.
type Candidate struct {
	Key      messages.WorkerKey
	Endpoint serving.Endpoint
	// OverlapBlocks is the rank's cached prefix as the router scored it.
	OverlapBlocks uint32
	// BookedBlocks is the load booked on the rank before this request
	// (the cost's decode blocks: every tracked request's blocks).
	BookedBlocks uint64
	// Saturated: the rank's engine reports saturation (engine signals).
	Saturated bool
}

// Reasons a scored rank is not a candidate (the skip metric's labels).
const (
	SkipNoServingEndpoint  = "no_serving_endpoint"  // registered without serving_endpoint
	SkipBadServingEndpoint = "bad_serving_endpoint" // one that does not parse (a peer's registry entry)
	SkipNotInSubset        = "not_in_subset"        // the data plane's subset hint leaves it out
	SkipBreakerOpen        = "breaker_open"         // its serving endpoint's circuit breaker is open
	SkipUnhealthy          = "unhealthy"            // its serving endpoint fails its active health checks
)

// Skipped counts the ranks left out of a candidate list, by reason.
type Skipped map[string]int

// Candidates turns a route answer (asked with include_scores) into the
// ranks to try, best first: the router's choice, then the other scored
// ranks by cost (lower logit, then fewer booked blocks, fewer prefill
// tokens, lower (worker, dp_rank)). A rank without a usable serving
// endpoint, or outside subset (host:port values; nil: no subset), is
// skipped and counted. At most max are returned (max ≤ 0: all).
func Candidates(res api.RouteResult, subset []string, max int) ([]Candidate, Skipped) {
	scores := slices.Clone(res.Scores)
	slices.SortFunc(scores, func(a, b api.RouteScore) int {
		return cmp.Or(cmp.Compare(a.Logit, b.Logit), cmp.Compare(a.ActiveDecodeBlocks, b.ActiveDecodeBlocks),
			cmp.Compare(a.ActivePrefillTokens, b.ActivePrefillTokens), cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DpRank, b.DpRank))
	})
	chosen := messages.WorkerKey{Worker: res.WorkerID, DpRank: res.DpRank}
	first := api.RouteScore{WorkerID: res.WorkerID, DpRank: res.DpRank, OverlapBlocks: res.OverlapBlocks, ServingEndpoint: res.ServingEndpoint}
	if i := slices.IndexFunc(scores, func(s api.RouteScore) bool { return key(s) == chosen }); i >= 0 {
		first = scores[i]
		scores = slices.Delete(scores, i, i+1)
	}
	var out []Candidate
	skipped := Skipped{}
	for _, s := range append([]api.RouteScore{first}, scores...) {
		if max > 0 && len(out) == max {
			break
		}
		if s.ServingEndpoint == "" {
			skipped[SkipNoServingEndpoint]++
			continue
		}
		ep, err := serving.Parse(s.ServingEndpoint)
		if err != nil {
			skipped[SkipBadServingEndpoint]++
			continue
		}
		if subset != nil && !InSubset(subset, ep.HostPort) {
			skipped[SkipNotInSubset]++
			continue
		}
		out = append(out, Candidate{Key: key(s), Endpoint: ep, OverlapBlocks: s.OverlapBlocks, BookedBlocks: s.ActiveDecodeBlocks, Saturated: s.Saturated})
	}
	return out, skipped
}

// InSubset reports whether a subset (the data plane's hint, or a
// conformance selection) allows hostPort: an entry equal to it, or a bare
// IP equal to its host — every port of that IP, as an InferencePool's
// targetPorts make one endpoint per data-parallel rank of a pod.
func InSubset(subset []string, hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	for _, e := range subset {
		if e == hostPort || (err == nil && strings.Trim(e, "[]") == host) {
			return true
		}
	}
	return false
}

func key(s api.RouteScore) messages.WorkerKey {
	return messages.WorkerKey{Worker: s.WorkerID, DpRank: s.DpRank}
}

// Overloaded says why a request should be shed ("" when it should not):
// no candidate has room, a rank having room when its engine is not
// saturated and it has at most threshold blocks booked (threshold 0: no
// cap on the booked blocks). ShedBooked: every candidate is over the
// booked-blocks cap; ShedSaturated: every candidate is saturated or over
// it, and one at least saturated. The router chooses a saturated rank
// only when every rank is, and is otherwise the least costly, so as long
// as one candidate has room the request goes there.
func Overloaded(cands []Candidate, threshold uint64) string {
	if len(cands) == 0 {
		return ""
	}
	why := ShedBooked
	for _, c := range cands {
		if c.Saturated {
			why = ShedSaturated
			continue
		}
		if threshold == 0 || c.BookedBlocks <= threshold {
			return ""
		}
	}
	return why
}

// Why Overloaded sheds.
const (
	ShedBooked    = "booked_blocks"
	ShedSaturated = "saturated"
)
