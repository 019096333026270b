package pinned

import (
	"time"

	"github.com/kvrouter/kvrouter/bench/loadgen"
)

// schedule is an open-loop constant-rate plan: request n (from 0) is due
// at began + n×period, and the plan ends after count requests. It is the
// generator's vegeta.Pacer (Pace) and the reference every latency is
// measured from (Due).
type schedule struct {
	period time.Duration
	count  uint64
	// began is the attack's start, learnt from the first Pace call
	// (vegeta passes the time elapsed since its own start).
	began time.Time
}

// newSchedule plans rate requests/s for d.
func newSchedule(rate float64, d time.Duration) *schedule {
	return &schedule{period: time.Duration(float64(time.Second) / rate), count: uint64(rate * d.Seconds())}
}

// Pace implements vegeta.Pacer: it waits until request hits is due and
// stops after count requests — by count, not by duration, so a generator
// running late still sends every request of the plan, late (and counted
// late), instead of dropping the ones it had no time for.
func (s *schedule) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if s.began.IsZero() {
		s.began = time.Now().Add(-elapsed)
	}
	if hits >= s.count {
		return 0, true
	}
	return max(time.Duration(hits)*s.period-elapsed, 0), false
}

// Rate implements vegeta.Pacer.
func (s *schedule) Rate(time.Duration) float64 { return float64(time.Second) / float64(s.period) }

// Due is when request seq was scheduled.
func (s *schedule) Due(seq uint64) time.Time { return s.began.Add(time.Duration(seq) * s.period) }

// sample is one answered (or failed) request: its sequence number in the
// plan, when the generator actually began it and when it ended.
type sample struct {
	Seq          uint64
	Began, Ended time.Time
	OK           bool
	Err          string // why it failed: a status line or a client error
}

// Stats is one measured point: the plan's requests after the warm-up, with
// latency from each request's scheduled time.
type Stats struct {
	// Scheduled counts the plan's requests after the warm-up; OK those
	// answered 200, Errors the rest (other statuses, timeouts, refused
	// connections).
	Scheduled, OK, Errors int
	// ErrorKinds counts the failures by reason (at most maxErrorKinds
	// reasons; the rest under "other").
	ErrorKinds map[string]int `json:"error_kinds,omitempty"`
	// Latency: scheduled send time → answer read, of the OK requests.
	Latency loadgen.Latency `json:"latency"`
	// SendLag: scheduled → actually begun by the generator, of every
	// request. A large SendLag means the generator (or its core) ran late;
	// it is part of Latency, never left out.
	SendLag loadgen.Latency `json:"send_lag"`
	// Refusal: scheduled send time → answer read, of the requests answered
	// 503 or 429 (a server's refusal, not a timeout).
	Refusal loadgen.Latency `json:"refusal"`
	// Throughput is OK answers per second over the measured window.
	Throughput float64
	// Sent and Answered count every request of the point, warm-up
	// included: sent, and answered 200 (what CPU is divided by).
	Sent, Answered int
	// CPU is what the point cost the server, the generator and the
	// engines in CPU time (filled in by the runner).
	CPU CPU `json:"cpu"`
}

// summarize measures a point: requests due before began+warmup are left
// out (connections open, caches warm), every later one counts, with
// latency from its due time — a request the generator sent late, or that
// queued behind a slow answer, carries its whole wait.
func summarize(s *schedule, samples []sample, warmup time.Duration) Stats {
	var st Stats
	var lat, lag, ref []time.Duration
	from := s.began.Add(warmup)
	first, last := time.Time{}, time.Time{}
	for _, x := range samples {
		st.Sent++
		if x.OK {
			st.Answered++
		}
		due := s.Due(x.Seq)
		if due.Before(from) {
			continue
		}
		st.Scheduled++
		lag = append(lag, x.Began.Sub(due))
		if !x.OK {
			if x.Err == refusedStatus503 || x.Err == refusedStatus429 {
				ref = append(ref, x.Ended.Sub(due))
			}
			st.Errors++
			st.countError(x.Err)
			continue
		}
		st.OK++
		lat = append(lat, x.Ended.Sub(due))
		if first.IsZero() || due.Before(first) {
			first = due
		}
		if x.Ended.After(last) {
			last = x.Ended
		}
	}
	st.Latency, st.SendLag, st.Refusal = loadgen.Summarize(lat), loadgen.Summarize(lag), loadgen.Summarize(ref)
	if w := last.Sub(first); w > 0 {
		st.Throughput = float64(st.OK) / w.Seconds()
	}
	return st
}

// The error classes (errorClass) of a server's refusals.
const (
	refusedStatus503 = "status 503"
	refusedStatus429 = "status 429"
)

// maxErrorKinds bounds Stats.ErrorKinds.
const maxErrorKinds = 8

func (st *Stats) countError(why string) {
	if st.ErrorKinds == nil {
		st.ErrorKinds = map[string]int{}
	}
	if _, ok := st.ErrorKinds[why]; !ok && len(st.ErrorKinds) >= maxErrorKinds {
		why = "other"
	}
	st.ErrorKinds[why]++
}
