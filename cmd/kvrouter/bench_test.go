package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBenchHelpExplainsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "--help"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"-quick", "-full", "-json", "-plots", "-trace", "-tokens-per-block", "-requests", "-workers",
		"-capacity", "-in-flight", "-sessions", "-shards", "-ingest-workers", "-ingest-passes", "-sweep-workers", "-rates",
		"-point-duration", "-clients", "-transports", "-seed", "-quiet", "-cpuprofile"} {
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
		{[]string{"--shards", "1,2"}, "2 shards"},
		{[]string{"--workers", "4,x"}, `"x" is not an integer`},
		{[]string{"--rates", "fast"}, "--rates"},
		{[]string{"--transports", "grpc"}, "unknown transport"},
		{[]string{"--quick=false"}, "needs --full"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"bench"}, c.args...), nil, &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errb.String(), c.want)
		}
	}
}

func TestIntList(t *testing.T) {
	got, err := intList(" 4, 16,,64 ")
	if err != nil || len(got) != 3 || got[0] != 4 || got[2] != 64 {
		t.Errorf("intList = %v, %v", got, err)
	}
}
