package eventually

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	last, ok := poll(time.Minute, func() (bool, string) { n++; return n == 3, fmt.Sprint("try ", n) })
	if !ok || n != 3 || last != "try 3" {
		t.Fatalf("ok %v after %d tries, last %q; want true after 3, \"try 3\"", ok, n, last)
	}
}

func TestPollReportsTheLastStateAtTheDeadline(t *testing.T) {
	n := 0
	last, ok := poll(5*time.Millisecond, func() (bool, string) { n++; return false, fmt.Sprint("try ", n) })
	if ok || n < 2 || last != fmt.Sprint("try ", n) {
		t.Fatalf("ok %v after %d tries, last %q; want false, the last try's state", ok, n, last)
	}
}

// fakeTB records Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestWithinFailsNamingWhatAndTheLastState(t *testing.T) {
	f := &fakeTB{}
	Within(f, time.Millisecond, "worker 1 quiescent", func() (bool, string) { return false, "next 26 (engine 23)" })
	if !strings.Contains(f.failed, "worker 1 quiescent") || !strings.Contains(f.failed, "next 26 (engine 23)") {
		t.Fatalf("failure %q does not name what was awaited and the last state", f.failed)
	}
	f = &fakeTB{}
	True(f, "done", func() (bool, string) { return true, "" })
	if f.failed != "" {
		t.Fatalf("a condition that holds failed the test: %q", f.failed)
	}
}
