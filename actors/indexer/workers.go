package indexer

// workers is the shard actors' protoactor dispatcher. The default one
// starts a goroutine for every mailbox run: a route's lookup on an idle
// shard paid a fresh goroutine and the copy of its stack as it grew past
// the initial 2 KB to the tree walk's depth (~8 % of a route's CPU in
// bench's BenchmarkRoute). Here a run is handed to a parked worker when
// one waits, else to a new worker; a worker that finishes a run parks
// for the next one, its stack already grown. A mailbox has at most one
// run at a time, so an index never holds more workers than shards.
type workers struct {
	throughput int
	work       chan func() // unbuffered: a send succeeds only into a parked worker
	done       chan struct{}
}

func newWorkers(throughput int) *workers {
	return &workers{throughput: throughput, work: make(chan func()), done: make(chan struct{})}
}

// Schedule implements actor.Dispatcher.
func (w *workers) Schedule(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.run(fn)
	}
}

// Throughput implements actor.Dispatcher: the messages one run handles
// before it yields.
func (w *workers) Throughput() int { return w.throughput }

func (w *workers) run(fn func()) {
	for {
		fn()
		select {
		case fn = <-w.work:
		case <-w.done:
			return
		}
	}
}

// stop lets the parked workers exit; a run scheduled later gets a worker
// that exits after it.
func (w *workers) stop() { close(w.done) }
