package loadgen

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
)

func TestPublishQueueReleasesInTimeThenBookingOrder(t *testing.T) {
	var q publishQueue[string]
	q.push(0.3, 1, "c")
	q.push(0.1, 0, "a")
	q.push(0.3, 1, "d") // same time as c, booked after it
	q.push(0.2, 0, "b")
	var got []string
	collect := func(_ int, s string) error { got = append(got, s); return nil }
	if err := q.release(0.05, collect); err != nil || len(got) != 0 {
		t.Fatalf("released %v before anything was due (%v)", got, err)
	}
	_ = q.release(0.2, collect)
	if !slices.Equal(got, []string{"a", "b"}) || q.Len() != 2 {
		t.Fatalf("due by 0.2: %v (%d left), want [a b]", got, q.Len())
	}
	_ = q.release(1, collect)
	if !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("released %v, want a b c d", got)
	}
}

func TestEventDelayPublishTime(t *testing.T) {
	d := DefaultEventDelay()
	if at := d.publishAt(1, 0.5); at != 1.52 {
		t.Errorf("prefill model: publish at %v, want 1.52 (arrival 1 + ttft 0.5 + 20 ms)", at)
	}
	if at := (EventDelay{Mode: DelayNone}).publishAt(1, 0.5); at >= 0 {
		t.Errorf("zero delay: publish at %v, want at once", at)
	}
	if err := (EventDelay{Mode: "later"}).Validate(); err == nil {
		t.Error("unknown mode accepted")
	}
	if d.Label() != "prefill+20ms" || (EventDelay{Mode: DelayNone}).Label() != "none" {
		t.Errorf("labels %q, %q", d.Label(), EventDelay{Mode: DelayNone}.Label())
	}
}

// siblings returns n requests sharing a prefix of prefix tokens, each with
// a short suffix of its own, arriving 1 ms apart.
func siblings(n, prefix int) ([]Request, []float64) {
	rng := rand.New(rand.NewPCG(5, 6))
	shared := tokenRun(rng, prefix)
	var reqs []Request
	var at []float64
	for i := range n {
		reqs = append(reqs, Request{Tokens: append(slices.Clone(shared), tokenRun(rng, 32)...), Session: "s" + string(rune('a'+i))})
		at = append(at, float64(i)*0.001)
	}
	return reqs, at
}

// busyWorkers is how many workers served at least one request.
func busyWorkers(tl Tally) int {
	n := 0
	for _, r := range tl.Requests {
		if r > 0 {
			n++
		}
	}
	return n
}

// Offline, an event-fed policy sees nothing of siblings routed before the
// first one's prefill is done: exact-greedy co-locates them only in the
// zero-delay replay.
func TestDelayedEventsHideSiblingsFromEventFedPolicies(t *testing.T) {
	reqs, at := siblings(16, 2048)
	cfg := CacheConfig{Workers: 8, BlockSize: 16, Capacity: 4096, InFlight: 64, Gap: 1, Arrivals: at}
	zero, err := ReplayOffline(reqs, NewGreedy(8, 1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Delay = DefaultEventDelay()
	delayed, err := ReplayOffline(reqs, NewGreedy(8, 1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if busyWorkers(zero) != 1 {
		t.Errorf("zero delay: siblings on %d workers, want 1 (each sees the first's blocks)", busyWorkers(zero))
	}
	if busyWorkers(delayed) < 4 || !(delayed.HitRate() < zero.HitRate()) {
		t.Errorf("delayed: siblings on %d workers, hit %.3f (zero delay %.3f): want them spread, fewer hits",
			busyWorkers(delayed), delayed.HitRate(), zero.HitRate())
	}
	// an approximate policy inserts at route time: the delay changes nothing
	cfg.Delay = EventDelay{}
	a, _ := ReplayOffline(reqs, NewSGLang(8), cfg)
	cfg.Delay = DefaultEventDelay()
	b, _ := ReplayOffline(reqs, NewSGLang(8), cfg)
	if a.HitRate() != b.HitRate() || !slices.Equal(a.Requests, b.Requests) {
		t.Errorf("sglang: zero delay %v %.3f, delayed %v %.3f: want the same", a.Requests, a.HitRate(), b.Requests, b.HitRate())
	}
}

// Through the real router: with the engines' events held until their
// prefill ends (200 ms after it here), four siblings fired within
// milliseconds on four workers co-locate with predict-on-route and spread
// over every worker without it (the load term, seeing no overlap anywhere).
func TestDelayedReplaySiblingsColocateOnlyWithPrediction(t *testing.T) {
	reqs, at := siblings(4, 2048)
	run := func(predict bool) Tally {
		t.Helper()
		c, err := startCluster(clusterConfig{Workers: 4, BlockSize: 16, Capacity: 4096, Shards: 1, Hosts: 1,
			Routing: routing.DefaultConfig(), SessionCredit: DefaultSessionCredit, NoPredict: !predict})
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		res, err := c.replayRouted(reqs, routedReplay{inFlight: 64, gap: 1, arrivals: at,
			delay: EventDelay{Mode: DelayPrefill, PublishInterval: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if res.timeouts != 0 {
			t.Errorf("%d published batches never became visible", res.timeouts)
		}
		return res.tally
	}
	on, off := run(true), run(false)
	if busyWorkers(on) != 1 {
		t.Errorf("prediction on: siblings on workers %v, want all on one", on.Requests)
	}
	if busyWorkers(off) != 4 || !(off.HitRate() < on.HitRate()) {
		t.Errorf("prediction off: siblings on workers %v, hit %.3f (on: %.3f): want them spread, fewer hits", off.Requests, off.HitRate(), on.HitRate())
	}
}
