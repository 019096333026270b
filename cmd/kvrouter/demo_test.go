package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
)

// The demo routes a Mooncake slice through the real API; kvrouter's prefix
// hit rate must beat random routing's on the same requests and stay under
// the unlimited-cache bound.
func TestDemoBeatsRandomRouting(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--requests", "800", "--trace", "../../../shared/traces/mooncake_conversation_trace.jsonl"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	rate := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^  ` + name + `\s+([0-9.]+)%`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no %s line in:\n%s", name, out.String())
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	kv, random, bound := rate("kvrouter"), rate("random"), rate("bound")
	if !(kv > random && kv <= bound) {
		t.Errorf("hit rates: kvrouter %.1f%%, random %.1f%%, bound %.1f%%\n%s", kv, random, bound, out.String())
	}
}
