package loadgen

import (
	"math"
	"testing"
)

func disaggTestConfig() DisaggConfig {
	return DisaggConfig{Prefill: 1, Decode: 1, BlockSize: 16, Capacity: 1024, InFlight: 8, Gap: 10,
		TransferPerBlock: 0.001, Delay: EventDelay{Mode: DelayNone}}
}

func prompt(n int, seed uint32) Request {
	r := Request{Tokens: make([]uint32, n)}
	for i := range r.Tokens {
		r.Tokens[i] = seed*100000 + uint32(i)
	}
	return r
}

func decider(t *testing.T, name string) DisaggDecider {
	for _, d := range DisaggDeciders() {
		if d.Name() == name {
			return d
		}
	}
	t.Fatalf("no decider %s", name)
	return nil
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A split request pays its prefill on the prefill worker plus the transfer
// of every block the decode worker lacks; a local one its prefill alone.
func TestReplayDisaggSplitPaysTransfer(t *testing.T) {
	cfg := disaggTestConfig()
	reqs := []Request{prompt(1024, 1)}
	split, err := ReplayDisagg(reqs, decider(t, NameDisaggAlways), cfg)
	if err != nil {
		t.Fatal(err)
	}
	local, err := ReplayDisagg(reqs, decider(t, NameDisaggNever), cfg)
	if err != nil {
		t.Fatal(err)
	}
	prefill := 1024.0 / ModelPrefillRate
	if split.Split != 1 || split.TransferBlocks != 64 || !near(split.TTFT[0], prefill+64*cfg.TransferPerBlock) {
		t.Fatalf("split: %+v, want 1 split, 64 blocks, TTFT %v", split, prefill+64*cfg.TransferPerBlock)
	}
	if local.Split != 0 || local.TransferBlocks != 0 || !near(local.TTFT[0], prefill) {
		t.Fatalf("local: %+v, want no split, TTFT %v", local, prefill)
	}
}

// The same prompt again: kvrouter's decision sees the decode worker warm
// (it received the blocks) and prefills locally, moving nothing; always
// split moves nothing either (the decode worker holds every block) but
// still books the prefill worker; both save the whole prompt.
func TestReplayDisaggWarmDecodeStaysLocal(t *testing.T) {
	cfg := disaggTestConfig()
	reqs := []Request{prompt(1024, 1), prompt(1024, 1)}
	kv, err := ReplayDisagg(reqs, decider(t, NameDisaggKvrouter), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if kv.Split != 1 || kv.TransferBlocks != 64 || kv.SavedTokens != 1024 || kv.TTFT[1] != 0 {
		t.Fatalf("kvrouter: %+v, want the first split (64 blocks), the second local with all 1024 tokens cached", kv)
	}
	always, err := ReplayDisagg(reqs, decider(t, NameDisaggAlways), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if always.Split != 2 || always.TransferBlocks != 64 || always.SavedTokens != 1024 {
		t.Fatalf("always: %+v, want 2 splits, 64 blocks moved once, 1024 tokens saved on the prefill worker", always)
	}
}

// A short uncached part stays local under kvrouter's and Dynamo's rules
// and splits under always.
func TestReplayDisaggShortPromptThresholds(t *testing.T) {
	cfg := disaggTestConfig()
	reqs := []Request{prompt(256, 2)}
	for name, want := range map[string]int{NameDisaggKvrouter: 0, NameDisaggDynamo: 0, NameDisaggLLMD: 0, NameDisaggAlways: 1, NameDisaggNever: 0} {
		got, err := ReplayDisagg(reqs, decider(t, name), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got.Split != want {
			t.Errorf("%s: %d splits of a 256-token prompt, want %d", name, got.Split, want)
		}
	}
}

func TestReplayDisaggRejectsBadFleet(t *testing.T) {
	cfg := disaggTestConfig()
	cfg.Prefill = 0
	if _, err := ReplayDisagg([]Request{prompt(16, 1)}, decider(t, NameDisaggNever), cfg); err == nil {
		t.Fatal("a 0:1 fleet was accepted")
	}
	cfg = disaggTestConfig()
	cfg.TransferPerBlock = math.NaN()
	if _, err := ReplayDisagg([]Request{prompt(16, 1)}, decider(t, NameDisaggNever), cfg); err == nil {
		t.Fatal("a NaN transfer cost was accepted")
	}
}
