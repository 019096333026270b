package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestServeRefusesMaxSessionsPastItsCap: a --max-sessions the session
// index cannot hold is refused at flag parsing with its cap, never lowered
// silently; --help names the cap.
func TestServeRefusesMaxSessionsPastItsCap(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--max-sessions", "1048577"}, nil, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "--max-sessions 1048577: at most 1048576") {
		t.Errorf("--max-sessions 1048577: exit %d, stderr:\n%s", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "at most 1048576") {
		t.Errorf("serve --help: exit %d, no cap named for --max-sessions:\n%s", code, out.String())
	}
}
