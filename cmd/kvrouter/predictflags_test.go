package main

import (
	"bytes"
	"strings"
	"testing"
)

// A predicted-wait falloff that is negative or not finite is refused at
// start, naming the flag; --help says what it does.
func TestPredictWaitFalloffFlag(t *testing.T) {
	for _, v := range []string{"-1", "+Inf", "NaN"} {
		var out, errb bytes.Buffer
		args := []string{"serve", "--predict-wait-falloff", v}
		if code := run(args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--predict-wait-falloff") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "-predict-wait-falloff") ||
		!strings.Contains(out.String(), "spreads a burst over idle") {
		t.Errorf("serve --help says nothing of the predicted-wait falloff:\n%s", out.String())
	}
}
