package loadgen

import "testing"

// An async feed never blocks a route client: a request whose engine queue
// is full is dropped and counted; the none feed serves nothing.
func TestFeederDropsWhenEngineBehind(t *testing.T) {
	r := &Request{Tokens: []uint32{1, 2, 3}}
	full := make(chan feedJob, 1)
	f := &feeder{mode: FeedAsync, queues: []chan feedJob{full}}
	f.offer(0, r, "s0")
	f.offer(0, r, "s0")
	f.offer(0, r, "s0")
	if got := f.dropped.Load(); got != 2 || len(full) != 1 {
		t.Errorf("dropped %d, queued %d; want 2 dropped, 1 queued", got, len(full))
	}
	none := &feeder{mode: FeedNone}
	none.offer(0, r, "")
	if got := none.stop(); got != 0 {
		t.Errorf("none feed dropped %d", got)
	}
}
