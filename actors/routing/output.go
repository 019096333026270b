package routing

import (
	"fmt"
	"math"
	"time"
)

// NoDecay is AddOutputBlock's decay argument for "no decay fraction": the
// new block counts in full and the request's other blocks keep their weight.
const NoDecay = -1.0

// AddOutputBlock records that a tracked request generated one more KV
// block (its decode progress, as a selection-service client reports it):
// the block joins the request's held blocks and the rank's active blocks.
// decay, in [0, 1], re-weights every block the request holds — its
// counted blocks become round(decay × held) — so a request near its end
// weighs less than a fresh one of the same length (the reference's
// decay_fraction; kvrouter's requests share no blocks, so all of a
// request's blocks are its own). NoDecay (or any negative value) keeps
// the weights. A request in decode has its deadline moved to now +
// DecodeTTL: it is still running. It returns the change in the rank's
// active blocks (what a cluster host tells the others) and the rank.
func (l *Load) AddOutputBlock(id string, decay float64, now time.Time) (RankLoad, error) {
	i, ok := l.ids[id]
	if !ok {
		l.stats.Unknown++
		return RankLoad{}, fmt.Errorf("routing: output block %q: %w", id, ErrUnknownRequest)
	}
	if decay > 1 || math.IsNaN(decay) {
		return RankLoad{}, fmt.Errorf("routing: output block %q: decay fraction %v (0..1): %w", id, decay, ErrInvalidLoad)
	}
	e := &l.entries[i]
	if e.held >= MaxISL {
		return RankLoad{}, fmt.Errorf("routing: output block %q: %d blocks held (at most %d): %w", id, e.held, MaxISL, ErrInvalidLoad)
	}
	t := l.tick(now)
	e.held++
	counted := e.blocks + 1
	if decay >= 0 {
		counted = int64(math.Round(decay * float64(e.held)))
	}
	delta := counted - e.blocks
	e.blocks = counted
	r := &l.slots[e.slot]
	r.Blocks += delta
	if e.phase == phaseDecode {
		l.unlinkTTL(&l.decode, i)
		e.deadline = l.deadline(t, l.cfg.DecodeTTL)
		l.pushTTL(&l.decode, i)
	}
	l.stats.OutputBlocks++
	return RankLoad{Key: r.Key, Blocks: delta}, nil
}
