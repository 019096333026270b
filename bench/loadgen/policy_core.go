package loadgen

import (
	"strconv"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
)

// NameDynamo labels Dynamo's KV router default as a baseline.
const NameDynamo = "dynamo"

// Core runs kvrouter's decision core (actors/routing) offline: the index
// is exact (it follows every engine's KV events, once they are published)
// and the load is the engine model's booked prefill and running requests,
// passed as each candidate's load. With routing's Dynamo cost at its
// defaults (weight 1, temperature 0) it is Dynamo's KV router default:
// logit = overlap_weight × prefill blocks + decode blocks, the lowest
// wins, ties among equal logits spread by a hash of the request (Dynamo
// picks one of the tied workers at random: the same distribution;
// lib/llm/src/kv_router/scheduler.rs, softmax_sample at temperature 0).
// Decode blocks are Dynamo's potential blocks (lib/kv-router/src/
// sequences/single.rs, ActiveSequences): the distinct blocks of the
// worker's running requests — a block several of them share counts once —
// plus the new request's blocks not already active there. Dynamo's
// predict-on-route side index (router_predicted_ttl_secs) is off by
// default and left out, as is its session affinity: it runs without the
// session ids kvrouter gets.
type Core struct {
	name  string
	r     *routing.Router
	idx   *holders
	cands []routing.Candidate
	ovs   []routing.Overlap
	n     int
	sig   *coreSignals // engine signals (outside_signals.go); nil: off
}

// NewCore returns the decision core with cfg as a policy over workers
// workers, labelled name.
func NewCore(name string, workers int, cfg routing.Config) (*Core, error) {
	r, err := routing.New(cfg)
	if err != nil {
		return nil, err
	}
	c := &Core{name: name, r: r, idx: newHolders(workers), cands: make([]routing.Candidate, workers)}
	for w := range c.cands {
		c.cands[w].Key = coreKey(w)
	}
	return c, nil
}

func coreKey(w int) messages.WorkerKey { return messages.WorkerKey{Worker: messages.WorkerID(w + 1)} }

// Name implements Policy.
func (c *Core) Name() string { return c.name }

// Pick implements Policy.
func (c *Core) Pick(q Query) int {
	depth, hit := c.idx.Match(q.Chain)
	c.ovs = c.ovs[:0]
	for _, w := range hit {
		c.ovs = append(c.ovs, routing.Overlap{Key: coreKey(w), Blocks: uint32(depth[w])})
	}
	for w := range c.cands {
		l := q.Fleet.Own(w)
		decode := int64(q.Fleet.ActiveBlocks(w) + q.Fleet.NewBlocks(w, q.Chain))
		c.cands[w].Remote = routing.RemoteLoad{PrefillTokens: l.PrefillTokens, Blocks: decode, Requests: int64(l.Running)}
	}
	c.scrape(q.Fleet)
	d, err := c.r.Decide(routing.Request{ID: "q" + strconv.Itoa(c.n), ISL: q.Tokens, BlockSize: q.BlockSize}, c.ovs, c.cands)
	c.n++
	if err != nil {
		return -1 // ReplayOffline reports the out-of-range pick
	}
	return int(d.Worker.Worker) - 1
}

// Observe implements Policy: the index follows the engine's events.
func (c *Core) Observe(worker int, events []simengine.Event) { c.idx.Apply(worker, events) }
