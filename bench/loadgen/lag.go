package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lagProber measures publish → index-apply lag while a phase runs: it takes
// the latest published batch offered to it, polls /query until that batch's
// blocks are visible, records the lag, and takes the next latest one. One
// probe at a time keeps its own load on the index to one query per
// pollEvery.
type lagProber struct {
	c        *cluster
	latest   atomic.Pointer[probe]
	ctx      context.Context
	cancel   context.CancelFunc
	done     sync.WaitGroup
	lags     []time.Duration
	timeouts int
}

// probeTimeout is how long a published batch may take to become visible
// before it counts as lost (a sign the pipeline fell behind).
const probeTimeout = 5 * time.Second

func (c *cluster) startProber() *lagProber {
	p := &lagProber{c: c}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.done.Add(1)
	go p.run()
	return p
}

// offer makes pr the next probe (replacing one not yet taken).
func (p *lagProber) offer(pr *probe) {
	if pr != nil {
		p.latest.Store(pr)
	}
}

func (p *lagProber) run() {
	defer p.done.Done()
	for p.ctx.Err() == nil {
		pr := p.latest.Swap(nil)
		if pr == nil {
			time.Sleep(pollEvery)
			continue
		}
		at, err := p.c.visible(p.ctx, pr, probeTimeout)
		switch {
		case err == nil:
			p.lags = append(p.lags, at.Sub(pr.sent))
		case p.ctx.Err() == nil:
			p.timeouts++
		}
	}
}

// stop ends probing and returns the lags measured and the probes that
// never became visible.
func (p *lagProber) stop() ([]time.Duration, int) {
	p.cancel()
	p.done.Wait()
	return p.lags, p.timeouts
}
