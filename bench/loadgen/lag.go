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
// cluster.pollEvery. Stopping lets the probe under way (and one still offered)
// finish, so a phase shorter than its lag still has a figure.
type lagProber struct {
	c        *cluster
	latest   atomic.Pointer[probe]
	stopping atomic.Bool
	done     sync.WaitGroup
	lags     []time.Duration
	timeouts int
}

// probeTimeout is how long a published batch may take to become visible
// before it counts as lost (a sign the pipeline fell behind).
const probeTimeout = 5 * time.Second

func (c *cluster) startProber() *lagProber {
	p := &lagProber{c: c}
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
	for {
		pr := p.latest.Swap(nil)
		if pr == nil {
			if p.stopping.Load() {
				return
			}
			time.Sleep(p.c.pollEvery())
			continue
		}
		at, err := p.c.visible(context.Background(), pr, probeTimeout)
		if err != nil {
			p.timeouts++
			continue
		}
		p.lags = append(p.lags, at.Sub(pr.sent))
	}
}

// stop ends probing once the probe under way (and one still offered) is
// measured — at most probeTimeout each — and returns the lags measured and
// the probes that never became visible.
func (p *lagProber) stop() ([]time.Duration, int) {
	p.stopping.Store(true)
	p.done.Wait()
	return p.lags, p.timeouts
}
