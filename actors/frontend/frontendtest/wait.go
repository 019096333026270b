// Package frontendtest holds what the front ends' tests share.
package frontendtest

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds or 20 s pass (generous: the suite
// shares a busy machine); the failure says what
// cond last saw. The polling interval is not a wait for an effect: every
// effect a test needs is a condition here.
func WaitFor(tb testing.TB, what string, cond func() (ok bool, seen any)) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s; last saw %v", what, seen)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
