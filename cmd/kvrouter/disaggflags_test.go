package main

import (
	"bytes"
	"strings"
	"testing"
)

// Bad disaggregation flags are refused at start with what is wrong; a bad
// role on --worker names the values it takes.
func TestServeRefusesBadDisaggFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--disagg sometimes":                "want auto, always or never",
		"--disagg-max-decode-hit 1.5":       "--disagg-max-decode-hit 1.5",
		"--disagg-min-uncached-tokens -1":   "--disagg-min-uncached-tokens -1",
		"--worker 1=tcp://a:1,role=encoder": "want prefill, decode, both or prefill-decode",
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"serve"}, strings.Fields(args)...), nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d, stderr:\n%s", args, code, errb.String())
		}
	}
}
