package main

import (
	"bytes"
	"strings"
	"testing"
)

// Engine-signal and sim surface flags that cannot work are refused at
// start, naming the flag.
func TestSignalsAndSimFlagsRefuseWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--engine-signals", "--signals-interval", "2s", "--signals-stale-after", "1s"}, "must be longer than --signals-interval"},
		{[]string{"serve", "--engine-signals", "--saturation-kv-usage", "1.5"}, "KV usage threshold 1.5"},
		{[]string{"serve", "--engine-signals", "--signals-timeout", "0s"}, "must be positive"},
		{[]string{"sim", "--driver", "none"}, "--driver none needs --http"},
		{[]string{"sim", "--driver", "none", "--endpoint", "tcp://127.0.0.1:0", "--replay-endpoint", "", "--http", "127.0.0.1:0", "--metrics", "tgi"}, `metrics "tgi"`},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "--saturation-queue") ||
		!strings.Contains(out.String(), "Engine signals:") {
		t.Errorf("serve --help says nothing of engine signals:\n%s", out.String())
	}
}
