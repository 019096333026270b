package loadgen

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
)

// Outside load (bench/README.md, "Outside load"): a share of every
// engine's traffic that the router under test never routes — a second
// router outside the cluster, clients that dial pods directly. Those
// requests are served by the same simulated engines: they queue on the
// engine model, fill and evict the caches and publish KV events through
// the event-delay model like any other request. The router under test
// learns of them only the way its real counterpart would: from the KV
// events, and (the policies that read engine metrics) from the engines'
// reported gauges at its own scrape or poll interval. Routers that count
// only their own requests (SGLang's and AIBrix's in-flight counts,
// Dynamo's active sequences, kvrouter without engine signals) never see
// them as load.
//
// The outside requests are unevenly spread: each outside session is
// pinned to one worker (a client or an outside router with its own
// affinity), drawn with weight W − rank over a seeded ranking of the W
// workers — a linear ramp from about twice the mean share down to
// nearly none. A quarter of the workers takes about 44 % of the outside
// load; the busiest gets about 2 × 30 % of the fleet-mean load on top of
// what the router sends, which queues but does not overload a worker on
// its own at 70 % offered load. Even outside load would change little:
// every worker would carry the same extra, so every router's choice stays
// the same; the uneven case is where load-blindness costs.

// OutsideLoad configures the outside load of a replay (zero: none).
type OutsideLoad struct {
	// Fraction is the outside requests' share of all requests, in [0, 0.9].
	Fraction float64
	// Seed ranks the workers for the outside distribution.
	Seed uint64
}

// MaxOutsideFraction bounds OutsideLoad.Fraction: beyond it the router
// under test routes too little to measure.
const MaxOutsideFraction = 0.9

// Validate reports a fraction out of range.
func (o OutsideLoad) Validate() error {
	if !(o.Fraction >= 0 && o.Fraction <= MaxOutsideFraction) {
		return fmt.Errorf("outside load %v: want a fraction in [0, %v]", o.Fraction, MaxOutsideFraction)
	}
	return nil
}

// Label names the outside load in reports ("" when there is none).
func (o OutsideLoad) Label() string {
	if o.Fraction == 0 {
		return ""
	}
	return "outside=" + strconv.FormatFloat(o.Fraction, 'g', -1, 64)
}

// outsideTokenMask makes an outside prompt's tokens differ from every
// routed prompt's (trace tokens stay far below 2^31), so the outside
// stream has its own prefixes with the trace's own reuse pattern.
const outsideTokenMask = 1 << 31

// Arrival is one request of a mixed replay: routed by the policy under
// test, or (Outside) sent straight to Worker.
type Arrival struct {
	Request
	Outside bool
	Worker  int
}

// Routed returns reqs as a replay without outside load.
func Routed(reqs []Request) []Arrival {
	out := make([]Arrival, len(reqs))
	for i, r := range reqs {
		out[i] = Arrival{Request: r}
	}
	return out
}

// MixOutside returns reqs, in order, with outside requests inserted so
// that they make o.Fraction of the result: outside request j copies the
// prompt of reqs[j × n / m] (n routed, m outside) under another token
// range, so outside conversations reuse their own earlier turns, and is
// pinned to its session's worker (OutsideLoad's doc). An outside request
// is inserted only before a routed request on the workload's clock, never
// inside a burst (Request.Follows), and is itself on the clock.
func MixOutside(reqs []Request, o OutsideLoad, workers int) ([]Arrival, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if workers <= 0 {
		return nil, fmt.Errorf("loadgen: outside load over %d workers", workers)
	}
	n := len(reqs)
	m := int(float64(n)*o.Fraction/(1-o.Fraction) + 0.5)
	if m == 0 {
		return Routed(reqs), nil
	}
	rank := rand.New(rand.NewPCG(o.Seed, 0x6f757473)).Perm(workers)
	cum := make([]uint64, workers) // cumulative weight W − rank, in rank order
	var total uint64
	for k := range workers {
		total += uint64(workers - k)
		cum[k] = total
	}
	pin := func(key string) int {
		h := fnv.New64a()
		h.Write([]byte(key))
		x := h.Sum64() % total
		for k, c := range cum {
			if x < c {
				return rank[k]
			}
		}
		return rank[workers-1]
	}
	out := make([]Arrival, 0, n+m)
	next := 0 // outside requests inserted so far
	for i, r := range reqs {
		// Outside requests due by routed request i (i × m / n), inserted
		// before it when it is on the clock.
		for r.Follows <= 0 && next < m && next*n <= i*m {
			out = append(out, outsideArrival(reqs[next*n/m], next, pin))
			next++
		}
		out = append(out, Arrival{Request: r})
	}
	for ; next < m; next++ {
		out = append(out, outsideArrival(reqs[next*n/m], next, pin))
	}
	return out, nil
}

// outsideArrival is outside request j, a copy of src's prompt.
func outsideArrival(src Request, j int, pin func(string) int) Arrival {
	toks := make([]uint32, len(src.Tokens))
	for k, t := range src.Tokens {
		toks[k] = t | outsideTokenMask
	}
	session := "outside/" + src.Session
	if src.Session == "" {
		session = "outside/#" + strconv.Itoa(j)
	}
	r := Request{Tokens: toks, HashIDs: src.HashIDs, Session: session, At: src.At}
	return Arrival{Request: r, Outside: true, Worker: pin(session)}
}

// requestsOf is the arrivals' requests, for the engine model's clock
// (ArrivalGap, ArrivalTimes): the gap offers ModelOfferedLoad of the
// fleet counting outside requests too.
func requestsOf(as []Arrival) []Request {
	out := make([]Request, len(as))
	for i, a := range as {
		out[i] = a.Request
	}
	return out
}

// BookOutside books an outside request on worker w: it queues, runs and
// counts in the engine's load (Load, KVUsage: what the engine reports)
// but not in the router's own (Own) and not among the active blocks a
// router tracks for its own requests (ActiveBlocks).
func (f *Fleet) BookOutside(w, prompt, cached int) float64 {
	return f.book(w, prompt, cached, nil, true)
}

// Own is worker w's load counting only the requests the router under test
// routed (Book, BookChain): what a router that keeps its own books sees.
// Without outside requests it is Load.
func (f *Fleet) Own(w int) WorkerLoad {
	l, e := f.loads[w], f.ext[w]
	return WorkerLoad{Running: l.Running - e.Running, Waiting: l.Waiting - e.Waiting,
		PrefillTokens: l.PrefillTokens - e.PrefillTokens, Blocks: l.Blocks - e.Blocks}
}

// accounts is the loads a request counts in: the engine's, and the
// outside share when it is an outside request.
func (f *Fleet) accounts(r *fleetReq) []*WorkerLoad {
	if r.outside {
		return []*WorkerLoad{&f.loads[r.worker], &f.ext[r.worker]}
	}
	return []*WorkerLoad{&f.loads[r.worker]}
}

// EngineGauges is what worker w's engine reports on /metrics now: requests
// waiting (not yet prefilling: the model prefills one at a time, the first
// of its queue) and running (in the batch, prefilling or decoding), and
// the KV blocks its running requests hold (at most the capacity).
func (f *Fleet) EngineGauges(w int) (waiting, running, kvBlocks int64) {
	l := f.loads[w]
	waiting = int64(max(0, l.Waiting-1))
	return waiting, int64(l.Running) - waiting, min(l.Blocks, int64(f.cfg.Capacity))
}
