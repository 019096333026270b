// Package frontendtest holds what the front ends' tests share.
package frontendtest

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

// WaitFor waits until cond holds (eventually.True, the module's one
// condition wait); the failure says what cond last saw.
func WaitFor(tb testing.TB, what string, cond func() (ok bool, seen any)) {
	tb.Helper()
	eventually.True(tb, what, func() (bool, string) {
		ok, seen := cond()
		return ok, fmt.Sprint(seen)
	})
}
