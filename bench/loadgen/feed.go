package loadgen

import (
	"sync"
	"sync/atomic"
)

// How the sweep's routed requests reach the engines.
const (
	// FeedAsync queues each routed request to its engine's own goroutine,
	// so a route client's next request never waits for an engine's serve
	// (hash chain, msgpack, ZeroMQ send): latency is the router's.
	FeedAsync = "async"
	// FeedInline serves each routed request on the client that routed it
	// before it takes the next one: the clients' time is shared between
	// the router and the simulated engines.
	FeedInline = "inline"
	// FeedNone serves nothing: the index stays as the replay left it, so
	// the sweep measures the route path alone, without ingest competing.
	FeedNone = "none"
)

// feedNote says, for the report, what each feed means for the sweep.
var feedNote = map[string]string{
	FeedAsync:  "engines serve each routed request from their own queues, so events are applied meanwhile",
	FeedInline: "the routing client serves each request on its engine before taking the next",
	FeedNone:   "nothing is served: the route path alone",
}

// feedQueue is how many routed requests may wait for one engine (async).
const feedQueue = 256

// feedJob is one routed request waiting for its engine.
type feedJob struct {
	req     *Request
	session string
}

// feeder serves routed requests on their engines and offers the published
// batches to the lag prober. Async, each engine has a bounded queue served
// in order by its own goroutine; a full queue drops the serve (counted:
// the engines fell behind the offered rate, and the point is invalid).
type feeder struct {
	mode    string
	c       *cluster
	prober  *lagProber
	queues  []chan feedJob // nil: inline
	done    sync.WaitGroup
	dropped atomic.Int64
}

func (c *cluster) startFeeder(mode string, prober *lagProber) *feeder {
	f := &feeder{mode: mode, c: c, prober: prober}
	if mode != FeedAsync {
		return f
	}
	f.queues = make([]chan feedJob, len(c.engines))
	for w := range f.queues {
		q := make(chan feedJob, feedQueue)
		f.queues[w] = q
		f.done.Add(1)
		go func() {
			defer f.done.Done()
			for j := range q {
				f.serve(w, j)
			}
		}()
	}
	return f
}

// offer serves r on engine w now (inline), queues it (async) or drops it
// uncounted (none).
func (f *feeder) offer(w int, r *Request, session string) {
	j := feedJob{req: r, session: session}
	switch f.mode {
	case FeedNone:
		return
	case FeedInline:
		f.serve(w, j)
		return
	}
	select {
	case f.queues[w] <- j:
	default:
		f.dropped.Add(1)
	}
}

func (f *feeder) serve(w int, j feedJob) {
	if _, p, err := f.c.serve(w, *j.req, j.session); err == nil {
		f.prober.offer(p)
	}
}

// stop waits until every queued request is served and returns how many
// were dropped.
func (f *feeder) stop() int {
	for _, q := range f.queues {
		close(q)
	}
	f.done.Wait()
	return int(f.dropped.Load())
}
