package requestpath

import (
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	"github.com/kvrouter/kvrouter/messages"
)

// fleetSim plays the flow-control bench's load on the admission rules
// alone, in simulated time: four workers with a cap of 10 booked blocks,
// requests of 4 blocks lasting 70 ms, 340 arrivals a second for 3 s with
// one in critical in the critical band, a 1 s TTL. The router sends a
// request to the least loaded worker; a request is admitted as route
// does it (Overloaded under the band's threshold, then the reserve); a
// request waits behind its band and higher ones, and each end dispatches
// the queue, highest band first, until one finds no room. No CPU, no
// network: what is left is the rules' own effect. hold models the one
// cost of the real path it keeps: a lower-band request refused was booked
// by the router on its worker first, and that booking stands for hold
// after the refusal, seen by the requests routed meanwhile.
type fleetSim struct {
	g      *Guard
	hold   time.Duration
	held   [4]time.Duration // a refused request's booking stands until then
	booked [4]uint64
	ends   []simEnd
	queue  [2][]simReq // by band index: 0 batch, 1 critical
	// results
	critWaits   []time.Duration
	batchServed int
	batchSent   int
}

type simReq struct {
	at   time.Duration
	band int // 0 batch, 1 critical
}

type simEnd struct {
	at     time.Duration
	worker int
}

const (
	simCap     = 10
	simBlocks  = 4
	simService = 70 * time.Millisecond
	simTTL     = time.Second
)

var simObjectives = []string{"batch", "critical"}

func (s *fleetSim) fleet(now time.Duration) []Candidate {
	out := make([]Candidate, len(s.booked))
	for i, b := range s.booked {
		if now < s.held[i] {
			b += simBlocks
		}
		out[i] = Candidate{Key: messages.WorkerKey{Worker: messages.WorkerID(i + 1)}, BookedBlocks: b}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int { return int(a.BookedBlocks) - int(b.BookedBlocks) })
	return out
}

// try admits r now if the rules let it, as Path.route decides.
func (s *fleetSim) try(now time.Duration, r simReq) bool {
	fleet := s.fleet(now)
	objective := simObjectives[r.band]
	w, keep := int(fleet[0].Key.Worker)-1, s.g.reserve(objective)
	if Overloaded(fleet[:DefaultMaxCandidates], s.g.shedAbove(objective, simCap)) != "" ||
		(keep > 0 && RoomLeft(fleet, fleet[0].Key, simCap) < keep) {
		if r.band == 0 {
			s.held[w] = now + s.hold
		}
		return false
	}
	s.booked[w] += simBlocks
	s.ends = append(s.ends, simEnd{now + simService, w})
	if r.band == 1 {
		s.critWaits = append(s.critWaits, now-r.at)
	} else {
		s.batchServed++
	}
	return true
}

// dispatch routes the queue's heads again, highest band first, until one
// finds no room; expired batch requests leave first.
func (s *fleetSim) dispatch(now time.Duration) {
	s.queue[0] = slices.DeleteFunc(s.queue[0], func(r simReq) bool { return now-r.at > simTTL })
	for band := 1; band >= 0; band-- {
		for len(s.queue[band]) > 0 {
			if !s.try(now, s.queue[band][0]) {
				return
			}
			s.queue[band] = s.queue[band][1:]
		}
	}
}

func (s *fleetSim) arrive(now time.Duration, r simReq) {
	if r.band == 0 {
		s.batchSent++
	}
	behind := len(s.queue[1]) > 0 || (r.band == 0 && len(s.queue[0]) > 0)
	if behind || !s.try(now, r) {
		s.queue[r.band] = append(s.queue[r.band], r)
	}
}

func runFleetSim(t *testing.T, critical int, headroom uint64, reserve int, hold time.Duration) *fleetSim {
	t.Helper()
	g := newGuard(t, frontendtest.NewClock(), GuardConfig{BreakerOff: true, Flow: &FlowConfig{
		Objectives: map[string]int{"critical": 10, "batch": 0}, Headroom: headroom, ReserveWorkers: reserve}})
	s := &fleetSim{g: g, hold: hold}
	gap := time.Second / 340
	for i := range 3 * 340 {
		now := time.Duration(i) * gap
		slices.SortFunc(s.ends, func(a, b simEnd) int { return int(a.at - b.at) })
		for len(s.ends) > 0 && s.ends[0].at <= now {
			e := s.ends[0]
			s.ends = s.ends[1:]
			s.booked[e.worker] -= simBlocks
			s.dispatch(e.at)
		}
		band := 0
		if i%critical == 0 {
			band = 1
		}
		s.arrive(now, simReq{at: now, band: band})
	}
	return s
}

// p99 and the largest of the critical band's waits.
func (s *fleetSim) critTail() (p99, worst time.Duration) {
	w := slices.Clone(s.critWaits)
	slices.Sort(w)
	return w[len(w)*99/100], w[len(w)-1]
}

// Under twice the fleet's capacity the rules decide the critical band's
// wait and the batch band's share. With no room kept a critical request
// waits for an answer to end. With one request in ten critical, room on
// one worker of the fleet (ReserveWorkers 1) lets every critical request
// in at once, as room on every worker (Headroom 4) does, and leaves the
// batch band far more of the fleet (a reserve of two, between the two).
// With a third critical (two thirds of the capacity) the critical band
// uses the room kept on every worker, so the headroom costs the batch
// band little; a reserve of one absorbs less, and one of two or three
// matches the headroom's p99 only with more room idle: there the reserve
// buys nothing.
func TestReserveAgainstHeadroomSimulated(t *testing.T) {
	type outcome struct {
		p99, worst  time.Duration
		batchServed int
	}
	run := func(critical int, headroom uint64, reserve int) outcome {
		s := runFleetSim(t, critical, headroom, reserve, 0)
		p99, worst := s.critTail()
		t.Logf("one in %d critical, headroom %d, reserve %d: critical wait p99 %v, worst %v; batch served %d of %d",
			critical, headroom, reserve, p99, worst, s.batchServed, s.batchSent)
		return outcome{p99, worst, s.batchServed}
	}
	// One in ten critical.
	none, headroom, reserve := run(10, 0, 0), run(10, 4, 0), run(10, 0, 1)
	if none.p99 < 10*time.Millisecond {
		t.Errorf("one in ten, no room kept: critical p99 wait %v, want the wait for an answer to end", none.p99)
	}
	if headroom.worst != 0 || reserve.worst != 0 {
		t.Errorf("one in ten: critical waits up to %v (headroom), %v (reserve 1); want none", headroom.worst, reserve.worst)
	}
	if reserve.batchServed*10 < headroom.batchServed*13 {
		t.Errorf("one in ten: the reserve serves %d batch requests, the headroom %d; want 30%% more", reserve.batchServed, headroom.batchServed)
	}
	if r2 := run(10, 0, 2); r2.worst != 0 || r2.batchServed <= headroom.batchServed || r2.batchServed >= reserve.batchServed {
		t.Errorf("one in ten, reserve 2: critical waits up to %v, %d batch served; want none, between %d (headroom) and %d (reserve 1)",
			r2.worst, r2.batchServed, headroom.batchServed, reserve.batchServed)
	}
	// A third critical.
	none, headroom, reserve = run(3, 0, 0), run(3, 4, 0), run(3, 0, 2)
	if headroom.p99*4 > none.p99 || reserve.p99*4 > none.p99 {
		t.Errorf("a third critical: p99 wait %v (headroom), %v (reserve 2); want under a quarter of %v (no room kept)", headroom.p99, reserve.p99, none.p99)
	}
	if reserve.batchServed >= headroom.batchServed {
		t.Errorf("a third critical: the reserve serves %d batch requests, the headroom %d; the critical band was expected to use the kept room",
			reserve.batchServed, headroom.batchServed)
	}
	if r1 := run(3, 0, 1); r1.p99 <= headroom.p99 {
		t.Errorf("a third critical, reserve 1: p99 wait %v, want above the headroom's %v (one worker's room absorbs less)", r1.p99, headroom.p99)
	}
	if r3 := run(3, 0, 3); r3.p99 != 0 || r3.batchServed >= reserve.batchServed {
		t.Errorf("a third critical, reserve 3: p99 wait %v, %d batch served; want 0, fewer than reserve 2's %d", r3.p99, r3.batchServed, reserve.batchServed)
	}
}

// The refused requests' bookings are what a reserve of one worker does
// not absorb when it is decided after booking (the path's second check;
// the router decides it before booking, actors/routing/room.go): when
// each stands 2 ms after its refusal, at one in ten
// critical a critical request arriving meanwhile finds the one worker
// with room full and queues, while room on every worker or on two
// workers still lets every critical request in at once.
func TestReserveAgainstHeldBookingsSimulated(t *testing.T) {
	queued := func(headroom uint64, reserve int) int {
		s := runFleetSim(t, 10, headroom, reserve, 2*time.Millisecond)
		n := 0
		for _, w := range s.critWaits {
			if w > 0 {
				n++
			}
		}
		t.Logf("one in ten critical, refused bookings standing 2 ms, headroom %d, reserve %d: %d of %d critical requests waited; batch served %d",
			headroom, reserve, n, len(s.critWaits), s.batchServed)
		return n
	}
	if n := queued(0, 1); n == 0 {
		t.Errorf("reserve 1: no critical request waited; want the ones arriving while a refused booking hides the worker with room")
	}
	if h, r2 := queued(4, 0), queued(0, 2); h != 0 || r2 != 0 {
		t.Errorf("%d critical requests waited with headroom 4, %d with reserve 2; want none", h, r2)
	}
}
