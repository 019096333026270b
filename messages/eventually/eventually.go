// Package eventually is the tests' one way to wait: poll a condition until
// it holds or a deadline passes, then fail with what the condition last
// reported. Tests never sleep to wait for something — a fixed sleep is too
// short on a busy machine and too long on an idle one; a polled condition
// ends as soon as it holds, and its deadline matters only when the test
// fails. It sits under messages/ because every layer of the module may
// import messages.
package eventually

import (
	"testing"
	"time"
)

// Deadline is how long True waits: generous, because it is spent only
// when the test is failing anyway, and a machine running other jobs may
// take seconds for what takes milliseconds alone.
const Deadline = 30 * time.Second

// True polls cond until it reports ok and fails the test (t.Fatalf) if it
// has not after Deadline, naming what was awaited and the state cond last
// described. cond runs on the test's goroutine and may act (publish a
// heartbeat, send a request) as well as look.
func True(tb testing.TB, what string, cond func() (ok bool, last string)) {
	tb.Helper()
	Within(tb, Deadline, what, cond)
}

// Within is True with its own deadline d.
func Within(tb testing.TB, d time.Duration, what string, cond func() (ok bool, last string)) {
	tb.Helper()
	if last, ok := poll(d, cond); !ok {
		tb.Fatalf("%s: not reached in %v; last seen: %s", what, d, last)
	}
}

// poll runs cond until it holds or d has passed (cond runs at least once,
// and once more after the deadline), backing off from 1 ms to 50 ms between
// tries.
func poll(d time.Duration, cond func() (bool, string)) (last string, ok bool) {
	end := time.Now().Add(d)
	pause := time.Millisecond
	for {
		ok, last = cond()
		if ok || time.Now().After(end) {
			return last, ok
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}
