package routing

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/messages"
)

// The route actor's predictions (package predicted): it owns the Table so
// that a decision and its prediction are one step — a sibling routed next
// sees the prediction, however close behind it arrives.

// PredictingProps is Props with a prediction table (package predicted)
// configured by pc: every RouteRequest that carries its Hashes is scored
// against the predictions as well, and the chosen worker gets the
// request's blocks predicted. Applied index batches
// (*messages.RouterEventBatch, the route actor as an index follower)
// confirm and kill predictions.
func PredictingProps(cfg Config, pc predicted.Config) (*actor.Props, error) {
	t, err := predicted.New(pc)
	if err != nil {
		return nil, err
	}
	return props(cfg, t)
}

// PredictionsRequest asks the route actor for its prediction counters and
// the predicted blocks of its event-less workers (answered with
// *PredictionsReply).
type PredictionsRequest struct{}

// PredictionsReply: Enabled false when the actor keeps no predictions;
// Blocks holds, per event-less (worker, dp_rank), its predicted blocks;
// WaitWithheld is Router.WaitWithheld (Config.PredictedWaitCheck).
type PredictionsReply struct {
	Enabled      bool
	Stats        predicted.Stats
	Blocks       map[messages.WorkerKey]int
	WaitWithheld uint64
}

// RemotePrediction is a prediction another router host made (a cluster
// shares them like booked load): the route actor records Hashes on Key,
// beyond the Carried blocks the request already had there, as if it had
// routed the request itself. Fire and forget; ignored without
// predictions or for a rank that is not a candidate here.
type RemotePrediction struct {
	Key     messages.WorkerKey
	Hashes  []messages.LocalHash
	Carried uint32
}

// remote records another host's prediction.
func (p *predictor) remote(m *RemotePrediction, known bool, now time.Time) {
	if p == nil || !known || len(m.Hashes) == 0 {
		return
	}
	p.table.Record(m.Key, m.Hashes, m.Carried, now)
}

// predictor is the route actor's prediction state: the table and reused
// scratch.
type predictor struct {
	table  *predicted.Table
	found  []predicted.Overlap
	merged []Overlap
	// conf holds the request's overlaps by key once a prediction needs
	// them (confirmed); confFor is the request they were filled for.
	conf    ovTable
	confFor *RouteRequest
	req     *RouteRequest
}

// confirmed is the request's own overlap on k (the index's and any
// session credit): where k's predicted blocks continue from.
func (p *predictor) confirmed(k messages.WorkerKey) uint32 {
	m := p.req
	if len(m.Overlaps) <= 8 {
		var best uint32
		for _, o := range m.Overlaps {
			if o.Key == k {
				best = max(best, o.Blocks)
			}
		}
		return best
	}
	if p.confFor != m {
		p.conf.reset(len(m.Overlaps))
		for _, o := range m.Overlaps {
			p.conf.putMax(o.Key, o.Blocks)
		}
		p.confFor = m
	}
	return p.conf.get(k)
}

// scored returns the overlaps to decide with: the request's (the index's,
// with any session credit) followed by the predicted ones, which Decide
// folds in with max per candidate.
func (p *predictor) scored(m *RouteRequest, now time.Time) []Overlap {
	if p == nil || len(m.Hashes) == 0 {
		return m.Overlaps
	}
	p.table.Expire(now)
	p.req = m
	p.found = p.table.Overlaps(m.Hashes, now, p.confirmed, p.found[:0])
	p.req, p.confFor = nil, nil
	if len(p.found) == 0 {
		return m.Overlaps
	}
	p.merged = append(p.merged[:0], m.Overlaps...)
	for _, o := range p.found {
		// The blocks beyond the request's own overlap there are the
		// prediction's: still to prefill while requests wait on them.
		p.merged = append(p.merged, Overlap{Key: o.Key, Blocks: o.Blocks, Predicted: o.Blocks - o.Confirmed, Waiting: o.Waiting})
	}
	return p.merged
}

// record predicts the request's blocks on the chosen worker and returns how
// many of the decision's overlap blocks the prediction added beyond the
// request's own overlap there.
func (p *predictor) record(m *RouteRequest, d Decision, err error, now time.Time) uint32 {
	if p == nil || len(m.Hashes) == 0 || (err != nil && !errors.Is(err, ErrFull)) {
		return 0
	}
	var carried uint32
	for _, o := range m.Overlaps {
		if o.Key == d.Worker {
			carried = max(carried, o.Blocks)
		}
	}
	p.table.Record(d.Worker, m.Hashes, carried, now)
	if d.OverlapBlocks > carried {
		return d.OverlapBlocks - carried
	}
	return 0
}

// follow applies an index batch to the predictions.
func (p *predictor) follow(b *messages.RouterEventBatch) {
	if p == nil {
		return
	}
	for _, k := range b.Clear {
		p.table.Clear(k)
	}
	for i := range b.Events {
		p.table.Apply(b.Events[i])
	}
}

// setModes makes every candidate event-less (capacity from eventLess) or
// event-publishing.
func (p *predictor) setModes(cands []Candidate, eventLess map[messages.WorkerKey]int) {
	if p == nil {
		return
	}
	for _, c := range cands {
		if n, ok := eventLess[c.Key]; ok {
			p.table.SetEventLess(c.Key, max(n, 0))
		} else {
			p.table.SetEventLess(c.Key, -1)
		}
	}
}

func (p *predictor) dropWorker(w messages.WorkerID) {
	if p != nil {
		p.table.DropWorker(w)
	}
}

func (p *predictor) report() *PredictionsReply {
	if p == nil {
		return &PredictionsReply{}
	}
	return &PredictionsReply{Enabled: true, Stats: p.table.Stats(), Blocks: p.table.EventLessBlocks()}
}
