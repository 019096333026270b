package main

import (
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

func parseGuardFlags(t *testing.T, args ...string) (*guardFlags, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addGuardFlags(fs)
	return f, fs.Parse(args)
}

// Flow control is on by default; the objectives come from an
// InferenceObjective list (this pool's) and --objective; bad values are
// refused with the flag's name.
func TestFlowFlags(t *testing.T) {
	f, err := parseGuardFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.flow.config("")
	if err != nil || cfg == nil || cfg.TTL != requestpath.DefaultFlowTTL || cfg.NoEndpointTTL != 0 || len(cfg.Objectives) != 0 {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	file := filepath.Join(t.TempDir(), "objectives.json")
	if err := os.WriteFile(file, []byte(`{"kind":"List","items":[
	  {"kind":"InferenceObjective","metadata":{"name":"chat"},"spec":{"priority":5,"poolRef":{"name":"pool"}}},
	  {"kind":"InferenceObjective","metadata":{"name":"theirs"},"spec":{"priority":9,"poolRef":{"name":"other"}}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = parseGuardFlags(t, "--inference-objectives", file, "--objective", "batch=-1", "--objective", "gold=100",
		"--flow-ttl", "5s", "--no-endpoint-ttl", "20s", "--flow-max-requests", "7", "--flow-max-bytes", "4096")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = f.flow.config("pool")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"chat": 5, "batch": -1, "gold": 100}; !maps.Equal(cfg.Objectives, want) {
		t.Fatalf("objectives %v, want %v", cfg.Objectives, want)
	}
	if cfg.TTL != 5*time.Second || cfg.NoEndpointTTL != 20*time.Second || cfg.MaxRequests != 7 || cfg.MaxBytes != 4096 {
		t.Fatalf("config %+v", cfg)
	}
	if g, err := f.build("ns/pool"); err != nil || g == nil {
		t.Fatalf("build: %v", err)
	}
	f, _ = parseGuardFlags(t, "--no-flow-control")
	if cfg, err := f.flow.config(""); cfg != nil || err != nil {
		t.Fatalf("--no-flow-control: %+v, %v", cfg, err)
	}
	for _, args := range [][]string{{"--objective", "x"}, {"--objective", "x=high"}, {"--objective", "x=1", "--objective", "x=2"}} {
		if _, err := parseGuardFlags(t, args...); err == nil {
			t.Errorf("%v: parsed", args)
		}
	}
	for _, args := range [][]string{{"--flow-ttl", "0s"}, {"--no-endpoint-ttl", "-1s"}, {"--flow-max-requests", "0"}, {"--flow-interval", "0s"},
		{"--inference-objectives", filepath.Join(t.TempDir(), "missing.json")}, {"--inference-objectives", file, "--objective", "chat=1"}} {
		f, err := parseGuardFlags(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.build("ns/pool"); err == nil {
			t.Errorf("%v: built", args)
		}
	}
}
