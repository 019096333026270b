package pinned

import (
	"testing"
	"time"
)

// The schedule paces by count: each request waits until it is due, one
// already late goes at once, and the plan stops after its count however
// late it runs.
func TestScheduleStopsByCount(t *testing.T) {
	s := newSchedule(1000, 2*time.Second) // 2,000 requests, 1 ms apart
	if w, stop := s.Pace(0, 0); w != 0 || stop {
		t.Errorf("first request: wait %v stop %v", w, stop)
	}
	if w, _ := s.Pace(time.Millisecond, 3); w != 2*time.Millisecond {
		t.Errorf("request 3 at 1 ms: wait %v, want 2ms", w)
	}
	if w, stop := s.Pace(10*time.Second, 1999); w != 0 || stop {
		t.Errorf("late request 1999: wait %v stop %v, want it sent at once", w, stop)
	}
	if _, stop := s.Pace(10*time.Second, 2000); !stop {
		t.Error("the plan did not stop after its 2,000 requests")
	}
	if got := s.Due(5).Sub(s.began); got != 5*time.Millisecond {
		t.Errorf("Due(5) = began + %v", got)
	}
}

// No coordinated omission: latency runs from the scheduled time, so a
// request the generator began 40 ms late (behind a stalled answer)
// counts 40 ms more than its round trip; the warm-up is left out, and
// failures count as errors, not latencies.
func TestSummarizeMeasuresFromTheScheduledTime(t *testing.T) {
	s, samples := plan(100*time.Millisecond, func(i uint64, due time.Time) sample {
		began, rtt := due, 100*time.Microsecond
		if i == 50 {
			began = due.Add(40 * time.Millisecond)
		}
		return sample{Seq: i, Began: began, Ended: began.Add(rtt), OK: i != 60, Err: "503 Service Unavailable"}
	})
	st := summarize(s, samples, 10*time.Millisecond)
	if st.Scheduled != 90 || st.OK != 89 || st.Errors != 1 {
		t.Fatalf("scheduled %d ok %d errors %d, want 90, 89, 1", st.Scheduled, st.OK, st.Errors)
	}
	if st.ErrorKinds["503 Service Unavailable"] != 1 {
		t.Errorf("error kinds %v", st.ErrorKinds)
	}
	if st.Latency.Max != 40100 || st.Latency.P50 != 100 {
		t.Errorf("latency p50 %v max %v µs, want 100 and 40100", st.Latency.P50, st.Latency.Max)
	}
	if st.SendLag.Max != 40000 || st.SendLag.P50 != 0 {
		t.Errorf("send lag p50 %v max %v µs", st.SendLag.P50, st.SendLag.Max)
	}
	if st.Throughput < 900 || st.Throughput > 1100 {
		t.Errorf("throughput %.0f/s, want about 1,000", st.Throughput)
	}
}

// A refusal (503, 429) is an error with its own latency from the scheduled
// time; a timeout is an error without one.
func TestSummarizeMeasuresRefusals(t *testing.T) {
	s, samples := plan(10*time.Millisecond, func(i uint64, due time.Time) sample {
		x := sample{Seq: i, Began: due, Ended: due.Add(time.Millisecond), OK: true}
		switch i % 3 {
		case 1:
			x.OK, x.Err, x.Ended = false, errorClass(503, ""), due.Add(200*time.Microsecond)
		case 2:
			x.OK, x.Err, x.Ended = false, errorClass(0, "i/o timeout"), due.Add(time.Second)
		}
		return x
	})
	st := summarize(s, samples, 0)
	if st.Errors != 6 || st.Refusal.N != 3 || st.Refusal.Max != 200 {
		t.Errorf("errors %d, refusals %d (max %v µs), want 6, 3 at 200 µs", st.Errors, st.Refusal.N, st.Refusal.Max)
	}
}

// plan is a started schedule at 1,000 req/s over d and one sample per
// planned request, made by at from its sequence number and due time.
func plan(d time.Duration, at func(i uint64, due time.Time) sample) (*schedule, []sample) {
	s := newSchedule(1000, d)
	s.Pace(0, 0)
	var samples []sample
	for i := range uint64(d / time.Millisecond) {
		samples = append(samples, at(i, s.Due(i)))
	}
	return s, samples
}
