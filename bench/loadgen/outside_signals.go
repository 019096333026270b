package loadgen

import (
	"math"

	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/actors/routing"
)

// NameKVRouterCore labels kvrouter's decision core replayed offline
// (Core with routing.DefaultConfig), and NameKVRouterSignals the same with
// engine signals on.
const (
	NameKVRouterCore    = "kvrouter-core"
	NameKVRouterSignals = "kvrouter-core+signals"
)

// SignalsInterval is how stale kvrouter's engine signals are in the model:
// the scraper polls every enginesignals.DefaultInterval and the service
// hands the latest observations to the route actor on its own 250 ms
// tick, not in phase with the scrape; the model takes the worst phase —
// the route actor gets, at each interval, what the scrape read one
// interval earlier.
const SignalsInterval = enginesignals.DefaultInterval

// coreSignals models kvrouter's engine-signals path for Core: at every
// SignalsInterval of the model's clock the route actor receives the
// engines' gauges as read one interval before (Fleet.EngineGauges: the
// engine counts every request, routed or not), with the saturation
// enginesignals' default thresholds give them, and routing.Router.Observe
// derives each worker's outside load against what the core has booked
// then (Fleet.Own) — as the service does with its candidates.
type coreSignals struct {
	thr     enginesignals.Thresholds
	read    []routing.Reported // the last scrape, not yet delivered
	seq     uint64
	nextAt  float64 // model seconds
	started bool
}

// NewKVRouterCore returns kvrouter's default decision core as an offline
// policy, with engine signals when signals is set.
func NewKVRouterCore(workers int, signals bool) (*Core, error) {
	name := NameKVRouterCore
	if signals {
		name = NameKVRouterSignals
	}
	c, err := NewCore(name, workers, routing.DefaultConfig())
	if err != nil || !signals {
		return c, err
	}
	c.sig = &coreSignals{thr: enginesignals.Thresholds{}.WithDefaults(), read: make([]routing.Reported, workers), nextAt: math.Inf(-1)}
	return c, nil
}

// scrape delivers the previous scrape and takes the next one when a
// SignalsInterval fell due (a no-op without signals). The model changes
// only at arrivals, so the state at the first arrival past a scrape
// instant is what that scrape read.
func (c *Core) scrape(f *Fleet) {
	s := c.sig
	if s == nil {
		return
	}
	now := f.Now()
	if now < s.nextAt {
		return
	}
	if s.started { // deliver what the last scrape read
		for w := range c.cands {
			c.cands[w].Reported = s.read[w]
		}
		c.r.Observe(c.cands)
	}
	s.started = true
	s.seq++
	for w := range c.cands {
		waiting, running, kv := f.EngineGauges(w)
		sig := enginesignals.Signals{Waiting: float64(waiting), Running: float64(running), HasLoad: true,
			KVUsage: f.KVUsage(w), HasKV: true}
		s.read[w] = routing.Reported{Seq: s.seq, Waiting: waiting, Running: running, KVBlocks: kv, HasKVBlocks: true,
			Saturated: s.thr.Saturation(sig, false) != ""}
	}
	step := SignalsInterval.Seconds()
	s.nextAt = (math.Floor(now/step) + 1) * step
}
