package main

import (
	"bytes"
	"strings"
	"testing"
)

// --help prints a command's usage once, to stdout; a bad flag prints the
// flag package's reason and the usage once, to stderr, and exits 2.
func TestHelpOnceOnStdout(t *testing.T) {
	for _, cmd := range []string{"serve", "demo", "tap", "sim", "decode", "tokenize"} {
		var out, errb bytes.Buffer
		if code := run([]string{cmd, "--help"}, nil, &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		if n := strings.Count(out.String(), "Usage: kvrouter "+cmd); n != 1 || errb.Len() != 0 {
			t.Errorf("%s --help: usage %d times on stdout, %d bytes on stderr", cmd, n, errb.Len())
		}
		out.Reset()
		errb.Reset()
		if code := run([]string{cmd, "--no-such-flag"}, nil, &out, &errb); code != 2 {
			t.Errorf("%s --no-such-flag: exit %d, want 2", cmd, code)
		}
		if n := strings.Count(errb.String(), "Usage: kvrouter "+cmd); n != 1 || out.Len() != 0 ||
			!strings.Contains(errb.String(), "flag provided but not defined") {
			t.Errorf("%s --no-such-flag: usage %d times on stderr, %d bytes on stdout:\n%s", cmd, n, out.Len(), errb.String())
		}
	}
}
