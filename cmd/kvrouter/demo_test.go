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
	"time"

	"github.com/kvrouter/kvrouter/bench/traces"
)

// The demo routes a slice of the embedded Mooncake conversation trace (its
// default) with sibling bursts mixed in through the real API; kvrouter's
// prefix hit rate must beat random routing's on the same requests and stay
// under the unlimited-cache bound. The engines publish each request's KV
// events only after its prefill ended (the engines' own count, read at
// each publish: none early, each at least the 20 ms publish interval
// after), and the bursts are there.
func TestDemoBeatsRandomRouting(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"demo", "--requests", "800"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	rate := func(name string) float64 { return demoFigure(t, out.String(), `(?m)^  `+name+`\s+([0-9.]+)%`) }
	if !regexp.MustCompile(`(?m)^kvrouter demo: fleet page at http://127\.0\.0\.1:[0-9]+/ui `).MatchString(out.String()) {
		t.Errorf("the demo does not print its fleet page's URL:\n%s", out.String())
	}
	kv, random, bound := rate("kvrouter"), rate("random"), rate("bound")
	if !(kv > random && kv <= bound) {
		t.Errorf("hit rates: kvrouter %.1f%%, random %.1f%%, bound %.1f%%\n%s", kv, random, bound, out.String())
	}
	if groups := demoFigure(t, out.String(), `(?m)^kvrouter demo: ([0-9]+) sibling bursts of 8 requests sharing a 4096-token prefix`); groups != 32 {
		t.Errorf("%v sibling bursts, want one after every 25 of the 800 trace requests: 32\n%s", groups, out.String())
	}
	events := regexp.MustCompile(`(?m)^KV events: ([0-9]+) batches published so far, ([0-9]+) before their request's prefill ended \(earliest (\S+) after its end\)`).
		FindStringSubmatch(out.String())
	if events == nil {
		t.Fatalf("no KV events line in:\n%s", out.String())
	}
	lag, err := time.ParseDuration(events[3])
	if batches, _ := strconv.Atoi(events[1]); batches < 800 || events[2] != "0" || err != nil || lag < 20*time.Millisecond {
		t.Errorf("KV events %q: want at least 800 batches, none before its prefill's end, each 20 ms after it at least", events[0])
	}
}

// demoFigure is the number re's first group matches in out.
func demoFigure(t *testing.T, out, re string) float64 {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no match of %s in:\n%s", re, out)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// Predict-on-route keeps a burst's siblings together: they arrive while
// their first one's 200 ms prefill runs (4,096 tokens at 20,000 tokens/s),
// before its events. With predictions off they spread over the engines as
// random routing does; with them on most follow the first one, and their
// hit rate is higher. The output says which run is which.
func TestDemoPredictionKeepsBurstsTogether(t *testing.T) {
	together := func(ttl, label string) (float64, float64) {
		var out, errb bytes.Buffer
		code := run([]string{"demo", "--requests", "200", "--burst-every", "20", "--prefill-tokens-per-second", "20000",
			"--predict-ttl", ttl}, nil, &out, &errb)
		if code != 0 {
			t.Fatalf("--predict-ttl %s: exit %d\n%s\n%s", ttl, code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "kvrouter demo: "+label+"; engines prefill 20000 tokens/s") {
			t.Errorf("--predict-ttl %s: the output does not say %q:\n%s", ttl, label, out.String())
		}
		line := `(?m)^  kvrouter  together\s+([0-9.]+)%   hit rate\s+([0-9.]+)%   \(` + regexp.QuoteMeta(label) + `\)$`
		return demoFigure(t, out.String(), line), demoFigure(t, out.String(), `(?m)^  kvrouter  together\s+[0-9.]+%   hit rate\s+([0-9.]+)%`)
	}
	offTogether, offHits := together("0", "predict-on-route off (--predict-ttl 0)")
	onTogether, onHits := together("2s", "predict-on-route on (--predict-ttl 2s)")
	if !(onTogether >= 70 && onTogether > offTogether && onHits > offHits) {
		t.Errorf("siblings together / their hit rate: %.1f%% / %.1f%% with predictions, %.1f%% / %.1f%% without; want at least 70%% together with them, and both higher",
			onTogether, onHits, offTogether, offHits)
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

// With --disagg-fleet the demo runs a disaggregated fleet through the
// proxy: the engines check every leg (the demo fails on a refused one),
// vLLM's conditional rule splits some requests and serves the others on
// their decode engine alone, SGLang splits every one, and no answer comes
// from a prefill engine.
func TestDemoDisaggFleet(t *testing.T) {
	for _, proto := range []string{"vllm", "sglang"} {
		t.Run(proto, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"demo", "--disagg-fleet", "1:2", "--disagg-protocol", proto, "--requests", "200"}, nil, &out, &errb)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
			}
			m := regexp.MustCompile(`(?m)^disaggregation \(` + proto + `, 1 prefill : 2 decode engines\): ([0-9]+) requests split \(prefill leg, then decode leg\), ([0-9]+) decode legs, ([0-9]+) served by their decode engine alone, ([0-9]+) legs refused$`).
				FindStringSubmatch(out.String())
			if m == nil {
				t.Fatalf("no disaggregation line in:\n%s", out.String())
			}
			split, _ := strconv.Atoi(m[1])
			local, _ := strconv.Atoi(m[3])
			if split == 0 || m[2] != m[1] || m[4] != "0" || (proto == "sglang") != (local == 0) {
				t.Errorf("%s: want requests split, one decode leg each, none refused, SGLang never alone\n%s", m[0], out.String())
			}
			if !regexp.MustCompile(`(?m)^  kvrouter\s+[0-9.]+%\s+requests per engine \[0 [0-9]+ [0-9]+\]$`).MatchString(out.String()) {
				t.Errorf("answers from the prefill engine, or no per-engine line:\n%s", out.String())
			}
		})
	}
}
