package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// --proxy-prefill-retries: 1 by default in serve (a failed prefill leg is
// sent once to the alternate prefill worker), 0 turns it off, and either
// reaches the proxy's DisaggOptions with the other split flags; any other
// value is refused at start, naming the flag and what it takes. --help
// says what is retried and when not.
func TestProxyPrefillRetriesFlag(t *testing.T) {
	engines := func(messages.WorkerID) string { return "vllm" }
	for _, tc := range []struct {
		args []string
		want int
	}{{nil, 1}, {[]string{"--proxy-prefill-retries", "0"}, 0}, {[]string{"--proxy-prefill-retries=1"}, 1}} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := addProxyFlags(fs)
		if err := fs.Parse(append(tc.args, "--proxy-on-prefill-failure", "fail")); err != nil {
			t.Fatal(err)
		}
		if err := f.check(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		d := f.disagg(engines)
		if d.PrefillRetries != tc.want || d.OnPrefillFailure != "fail" || d.Protocol != "auto" || d.Engines == nil || d.Engines(1) != "vllm" {
			t.Errorf("%v: disagg options %+v, want %d prefill retries", tc.args, d, tc.want)
		}
	}
	for _, v := range []string{"2", "-1"} {
		var out, errb strings.Builder
		if code := run([]string{"serve", "--proxy-prefill-retries", v}, nil, &out, &errb); code != 2 ||
			!strings.Contains(errb.String(), "--proxy-prefill-retries "+v+": want 0 or 1") {
			t.Errorf("--proxy-prefill-retries %s: exit %d, stderr:\n%s", v, code, errb.String())
		}
	}
	var out, errb strings.Builder
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := strings.Join(strings.Fields(out.String()+errb.String()), " ")
	for _, want := range []string{"-proxy-prefill-retries", "alternate prefill worker", "Not on a 4xx", "(default 1)"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help does not say %q", want)
		}
	}
}
