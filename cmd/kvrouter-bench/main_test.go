package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBenchHelpExplainsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"-quick", "-full", "-json", "-plots", "-trace", "-tokens-per-block", "-requests", "-workers",
		"-capacity", "-in-flight-per-worker", "-sessions", "-shards", "-hosts", "-ingest-workers", "-ingest-passes", "-sweep-workers", "-rates",
		"-point-duration", "-clients", "-transports", "-seed", "-quiet", "-cpuprofile", "-memprofile", "-overlap-weight", "-temperature",
		"-session-credit", "-feed", "-chaos", "-chaos-trials", "-chaos-seed", "-chaos-kinds"} {
		if !strings.Contains(out.String(), "  "+f) {
			t.Errorf("--help does not explain %s", f)
		}
	}
}

// Bad flag values stop before anything starts, with the reason.
func TestBenchRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sessions", "maybe"}, "want on, off or both"},
		{[]string{"--shards", "1,0"}, "shard counts must be positive"},
		{[]string{"--overlap-weight", "1,heavy"}, `--overlap-weight: "heavy" is not a number`},
		{[]string{"--overlap-weight", "-1"}, "must not be negative"},
		{[]string{"--session-credit", "x"}, "--session-credit"},
		{[]string{"--feed", "sync"}, `unknown feed "sync"`},
		{[]string{"--chaos", "--chaos-kinds", "drop,meteor"}, `unknown fault kind "meteor"`},
		{[]string{"--chaos", "--chaos-trials", "0"}, "--chaos-trials 0 must be positive"},
		{[]string{"--workers", "4,x"}, `"x" is not an integer`},
		{[]string{"--rates", "fast"}, "--rates"},
		{[]string{"--transports", "grpc"}, "unknown transport"},
		{[]string{"--quick=false"}, "needs --full"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
}

// --chaos runs the trials and prints their report: two seeded trials of
// message faults keep every rule.
func TestBenchChaosRunsTrials(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--chaos", "--chaos-trials", "2", "--chaos-seed", "7", "--chaos-kinds", "drop,reorder"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "chaos: 2 trials (seeds 7..8)") || !strings.Contains(out.String(), "0 failed") {
		t.Errorf("report:\n%s", out.String())
	}
}

// The pinned mode's help explains each of its flags; bad values and a
// missing kvrouter binary stop it before anything starts.
func TestPinnedHelpAndBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"pinned", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"-quick", "-kvrouter", "-json", "-quiet", "-rates", "-ingest", "-engines", "-engine-nice", "-capacity", "-shards",
		"-router-cpu", "-load-cpu", "-max-conns", "-duration", "-warmup", "-fill-timeout", "-timeout", "-pin", "-nice", "-router-cpuprofile", "-generator-cpuprofile"} {
		if !strings.Contains(out.String(), "  "+f) {
			t.Errorf("pinned --help does not explain %s", f)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pinned", "--rates", "fast"}, "--rates"},
		{[]string{"pinned", "--kvrouter", "/nonexistent/kvrouter"}, "make build, or --kvrouter"},
		{[]string{"floor-server", "--http", "256.0.0.1:1"}, "floor-server"},
	} {
		out.Reset()
		errb.Reset()
		if code := run(c.args, &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
}
