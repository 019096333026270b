package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/bench/traces"
)

// The demo routes a slice of the embedded Mooncake conversation trace (its
// default) through the real API; kvrouter's prefix hit rate must beat
// random routing's on the same requests and stay under the unlimited-cache
// bound.
func TestDemoBeatsRandomRouting(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--requests", "800"}, nil, &out, &errb)
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
	if !regexp.MustCompile(`(?m)^kvrouter demo: fleet page at http://127\.0\.0\.1:[0-9]+/ui `).MatchString(out.String()) {
		t.Errorf("the demo does not print its fleet page's URL:\n%s", out.String())
	}
	kv, random, bound := rate("kvrouter"), rate("random"), rate("bound")
	if !(kv > random && kv <= bound) {
		t.Errorf("hit rates: kvrouter %.1f%%, random %.1f%%, bound %.1f%%\n%s", kv, random, bound, out.String())
	}
}

// TestDemoReadsATraceFile checks --trace PATH replaces the embedded trace:
// a file holding the conversation trace's first 40 lines gives a 40-request
// run labelled by the file's name, and a missing file fails naming it.
func TestDemoReadsATraceFile(t *testing.T) {
	r, err := traces.Open(traces.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var head bytes.Buffer
	sc := bufio.NewScanner(r)
	for i := 0; i < 40 && sc.Scan(); i++ {
		head.Write(sc.Bytes())
		head.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "head.jsonl")
	if err := os.WriteFile(path, head.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "--engines", "2", "--trace", path}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if want := "2 simulated engines, 40 requests of the head trace"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	out.Reset()
	errb.Reset()
	if code := run([]string{"demo", "--trace", missing}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), missing) {
		t.Errorf("--trace of a missing file: exit %d, stderr %q; want 1 naming the file", code, errb.String())
	}
}
