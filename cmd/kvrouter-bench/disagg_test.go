package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/bench/loadgen"
)

func TestDisaggPrintsEveryDecider(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"disagg", "--trace", "builtin:conversation", "--requests", "50", "--disagg-fleet", "1:2"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, d := range loadgen.DisaggDeciders() {
		if !strings.Contains(out.String(), "1:2  "+d.Name()) {
			t.Errorf("no row for %s in\n%s", d.Name(), out.String())
		}
	}
}

func TestDisaggRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--disagg-fleet", "0:2"}, {"--disagg-fleet", "2"}, {"--disagg-fleet", "a:b"},
		{"--disagg-transfer-block", "-1"}, {"--event-delay", "sometimes"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"disagg"}, args...), &out, &errb); code != 1 || !strings.Contains(errb.String(), "kvrouter-bench disagg:") {
			t.Errorf("%v: exit %d, stderr %q; want 1 with a reason", args, code, errb.String())
		}
	}
}
