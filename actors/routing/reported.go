package routing

import (
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Reported is what a candidate's engine last said about itself (its
// /metrics, read by actors/enginesignals and passed in by the service);
// the zero value is "nothing reported", which changes nothing.
//
// # Booked and reported load
//
// The router books every request it routes (Load) and frees it when the
// request path or the client says so; that load is exact for its own
// traffic and blind to everything else. The engine's gauges see all of
// its traffic but only as of the scrape, and nothing routed since. The
// cost uses both: when a new scrape arrives (Observe), the router takes a
// snapshot of what it had booked on the rank at that moment, and the
// part of the engine's reported load beyond that snapshot is the rank's
// outside load:
//
//	outside_requests = max(0, waiting + running − booked_requests)
//	outside_blocks   = max(0, kv_blocks + waiting × kv_blocks / running − booked_blocks)
//
// (kv_blocks = the KV share in use × the engine's blocks; a waiting
// request is assumed to need what a running one holds on average; no KV
// figure: the outside requests × the booked blocks per booked request).
// The outside load is added to the booked load, which keeps moving with
// every route, prefill_done and free: the cost sees reported plus what
// was booked after the scrape, so a burst routed between two scrapes is
// never invisible (the reported load alone would be), and traffic that
// never passed this router is never invisible either (booked load alone
// would be). Both clamps keep the booked load as the floor: requests
// routed but not yet visible to the engine when it was scraped, or
// finished but not yet freed, can make reported less than booked, and the
// router then trusts its own books. The snapshot is taken when the
// candidates reach the route actor (every 250 ms), a little after the
// scrape: requests booked in between count as booked, so the outside
// load is underestimated, never doubled.
//
// A Saturated candidate (enginesignals' rule: queue or KV usage above
// the thresholds, or signals stale) is chosen only when every candidate
// is saturated; Decision.Saturated then says so, and the request path
// sheds (actors/frontend/requestpath, Overload).
//
// # LoRA affinity
//
// A request for adapter A (Request.Lora) prefers, among candidates whose
// engine reports its adapters (vLLM's vllm:lora_requests_info), one
// running A, then one with room for one more adapter under max_lora (or
// A already waiting there), and takes one whose slots are all held by
// other adapters only when every candidate is full — an engine loading
// a new adapter into a full set makes the request wait. The cost decides
// within a tier. Candidates reporting no adapters are treated as having
// room. Its hash namespace (the LoRA name's seed) is unchanged.
type Reported struct {
	// Seq numbers the engine's successful scrapes (0: never scraped, or
	// signals not enabled); a new Seq is a new scrape.
	Seq uint64
	// Waiting and Running are the engine's request gauges.
	Waiting, Running int64
	// KVBlocks is the KV blocks in use (the KV share × the engine's
	// blocks); HasKVBlocks is false when the engine reports neither.
	KVBlocks    int64
	HasKVBlocks bool
	// Saturated: the rank is saturated (see above).
	Saturated bool
	// Lora is the engine's LoRA adapter state (Known false: the engine
	// reports none).
	Lora LoraSlots
}

// LoraSlots is an engine's adapters: those with running and waiting
// requests, and how many it holds at once (vLLM's max_lora).
type LoraSlots struct {
	Known            bool
	Running, Waiting []string
	Max              int
}

// Preference tiers (lower first): a candidate of a higher tier is chosen
// only when no candidate of a lower one is left. Saturation dominates;
// within it, LoRA affinity for a request naming an adapter: the adapter
// already running, then room under max_lora for one more, then full.
const (
	tierLoraRunning = 0
	tierLoraRoom    = 1
	tierLoraFull    = 2
	tierSaturated   = 4
)

// tierOf is a candidate's preference tier for a request for adapter lora.
func tierOf(rep *Reported, lora string) uint8 {
	var t uint8
	if rep.Saturated {
		t = tierSaturated
	}
	if lora == "" {
		return t
	}
	if !rep.Lora.Known {
		return t + tierLoraRoom
	}
	l := &rep.Lora
	if slices.Contains(l.Running, lora) {
		return t + tierLoraRunning
	}
	loaded := len(l.Running)
	for _, w := range l.Waiting {
		if !slices.Contains(l.Running, w) {
			loaded++
		}
	}
	if slices.Contains(l.Waiting, lora) || l.Max == 0 || loaded < l.Max {
		return t + tierLoraRoom
	}
	return t + tierLoraFull
}

// observed is the outside load computed at one scrape of one rank.
type observed struct {
	seq     uint64
	outside RemoteLoad
	booked  RemoteLoad
}

// Observe takes in the candidates' reported load (the route actor calls
// it with each new candidate list): for each candidate with a scrape it
// has not seen, it snapshots the booked load and computes the outside
// load (Reported's doc); a scrape it has seen keeps its outside load.
// It sets each candidate's outside load in place.
func (r *Router) Observe(cands []Candidate) {
	prev := r.observed
	r.observed = make(map[messages.WorkerKey]observed, len(cands))
	for i := range cands {
		c := &cands[i]
		if c.Reported.Seq == 0 {
			c.outside = RemoteLoad{}
			continue
		}
		o, seen := prev[c.Key]
		if !seen || o.seq != c.Reported.Seq {
			o = observed{seq: c.Reported.Seq, booked: r.booked(c)}
			o.outside = outsideLoad(c.Reported, o.booked)
		}
		r.observed[c.Key] = o
		c.outside = o.outside
	}
}

// booked is the load booked on a candidate now: this router's and the
// other hosts'.
func (r *Router) booked(c *Candidate) RemoteLoad {
	b := c.Remote
	l := r.held(c.Key)
	b.PrefillTokens += l.PrefillTokens
	b.Blocks += l.Blocks
	b.Requests += int64(l.PrefillRequests + l.DecodeRequests)
	return b
}

// outsideLoad is the reported load beyond the booked (Reported's doc).
func outsideLoad(rep Reported, booked RemoteLoad) RemoteLoad {
	var out RemoteLoad
	out.Requests = max(0, rep.Waiting+rep.Running-booked.Requests)
	switch {
	case rep.HasKVBlocks:
		demand := rep.KVBlocks
		if rep.Running > 0 {
			demand += rep.Waiting * rep.KVBlocks / rep.Running
		}
		out.Blocks = max(0, demand-booked.Blocks)
	case booked.Requests > 0:
		out.Blocks = out.Requests * booked.Blocks / booked.Requests
	}
	return out
}

// OutsideLoad is one rank's outside load and the booked load it was
// measured against, as the cost uses them (OutsideRequest).
type OutsideLoad struct {
	Key     messages.WorkerKey
	Outside RemoteLoad
	Booked  RemoteLoad
}

// OutsideLoads appends every observed rank's outside load to dst.
func (r *Router) OutsideLoads(dst []OutsideLoad) []OutsideLoad {
	for k, o := range r.observed {
		dst = append(dst, OutsideLoad{Key: k, Outside: o.outside, Booked: o.booked})
	}
	return dst
}

// OutsideRequest asks the route actor for its candidates' outside load
// (answered with *OutsideReply).
type OutsideRequest struct{}

// OutsideReply is Router.OutsideLoads.
type OutsideReply struct{ Ranks []OutsideLoad }
