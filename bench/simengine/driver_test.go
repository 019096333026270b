package simengine

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/bench/traces"
)

func TestRandomDriverIsDeterministicAndSharesPrefixes(t *testing.T) {
	cfg := RandomConfig{Seed: 9, BlockSize: 4, Prefixes: 3, MaxPrefixBlocks: 6, Sessions: true, Limit: 200}
	a, err := NewRandomDriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewRandomDriver(cfg)
	c, _ := NewRandomDriver(RandomConfig{Seed: 10, BlockSize: 4, Prefixes: 3, MaxPrefixBlocks: 6})
	cache := mustCache(t, Config{BlockSize: 4, CapacityBlocks: 1000})
	var hits, differ int
	for i := 0; ; i++ {
		pa, errA := a.Next()
		pb, errB := b.Next()
		if errA != nil || errB != nil {
			if !errors.Is(errA, io.EOF) || !errors.Is(errB, io.EOF) || i != 200 {
				t.Fatalf("prompt %d: errors %v, %v; want io.EOF after 200", i, errA, errB)
			}
			break
		}
		if !slices.Equal(pa.Tokens, pb.Tokens) || pa.SessionID != pb.SessionID {
			t.Fatalf("prompt %d differs between equal seeds", i)
		}
		if !strings.HasPrefix(pa.SessionID, "sess-") {
			t.Fatalf("session %q", pa.SessionID)
		}
		if pc, _ := c.Next(); !slices.Equal(pa.Tokens, pc.Tokens) {
			differ++
		}
		cached, _ := cache.Serve(pa.Tokens)
		hits += cached
	}
	if hits == 0 || differ == 0 {
		t.Fatalf("hits %d, prompts differing across seeds %d", hits, differ)
	}
	if _, err := NewRandomDriver(RandomConfig{Prefixes: -1}); err == nil {
		t.Error("negative config accepted")
	}
}

const sampleTrace = `{"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [0, 1, 2]}

{"timestamp": 7, "input_length": 1536, "output_length": 9, "hash_ids": [0, 1, 3]}
{"timestamp": 9, "input_length": 600, "output_length": 1, "hash_ids": [4, 5]}
`

func TestTraceDriverExpandsHashIDs(t *testing.T) {
	d, err := NewTraceDriver(strings.NewReader(sampleTrace), TraceConfig{TokensPerBlock: 16})
	if err != nil {
		t.Fatal(err)
	}
	var ps []Prompt
	for {
		p, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if len(ps) != 3 {
		t.Fatalf("%d prompts, want 3 (blank lines skipped)", len(ps))
	}
	// input_length 40 of 3×512 is clamped to keep a token of the last id:
	// 2×16+1; 1536 = 3 full blocks; 600 of 2×512 → ceil(600×16/512) = 19.
	for i, want := range []int{33, 48, 19} {
		if len(ps[i].Tokens) != want {
			t.Errorf("prompt %d has %d tokens, want %d", i, len(ps[i].Tokens), want)
		}
	}
	if !slices.Equal(ps[0].Tokens[:32], ps[1].Tokens[:32]) {
		t.Error("equal hash ids [0, 1] gave different tokens")
	}
	if slices.Equal(ps[0].Tokens[32:33], ps[1].Tokens[32:33]) && slices.Equal(ps[1].Tokens[32:48], ps[2].Tokens[:16]) {
		t.Error("different hash ids gave equal tokens")
	}
	if ps[1].At != 7e6 || ps[1].OutputTokens != 9 {
		t.Errorf("prompt 1 at %v, output %d", ps[1].At, ps[1].OutputTokens)
	}
	other, _ := NewTraceDriver(strings.NewReader(sampleTrace), TraceConfig{TokensPerBlock: 16, Seed: 1})
	if p, _ := other.Next(); slices.Equal(p.Tokens, ps[0].Tokens) {
		t.Error("Seed does not change the token runs")
	}
}

// failingReader serves its text, then fails: a driver with a Limit must
// never get there.
type failingReader struct{ r io.Reader }

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, errors.New("read past the limit")
	}
	return n, err
}

func TestTraceDriverLimitStopsReading(t *testing.T) {
	// The second line is garbage; a limit of 1 must not parse it. (The
	// scanner may buffer ahead, but never surfaces what it did not need.)
	d, _ := NewTraceDriver(&failingReader{strings.NewReader(sampleTrace[:strings.IndexByte(sampleTrace, '\n')+1] + "garbage\n")},
		TraceConfig{TokensPerBlock: 16, Limit: 1})
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the limit: %v, want io.EOF", err)
	}
}

func TestTraceDriverRejectsBadLines(t *testing.T) {
	for _, line := range []string{
		`{"input_length": 5, "hash_ids": [1]}`,                                // no timestamp
		`{"timestamp": -1, "hash_ids": [1]}`,                                  // negative time
		`{"timestamp": 0, "input_length": -5, "hash_ids": [1]}`,               // negative length
		`{"timestamp": 0, "hash_ids": [-1]}`,                                  // negative id
		`{"timestamp": 0, "hash_ids": "x"}`,                                   // not a list
		`{"timestamp": 0, "hash_ids": [` + strings.Repeat("1,", 5000) + `1]}`, // over MaxPromptTokens
		`[1, 2]`,
	} {
		d, _ := NewTraceDriver(strings.NewReader("\n"+line+"\n"), TraceConfig{})
		_, err := d.Next()
		if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("line %.40q: err %v, want one naming line 2", line, err)
		}
	}
}

// TestTraceDriverReadsMooncake reads the head of the embedded traces.
func TestTraceDriverReadsMooncake(t *testing.T) {
	for _, name := range traces.Names() {
		d, err := OpenTrace(traces.BuiltinPrefix+name, TraceConfig{TokensPerBlock: 16, Limit: 300})
		if err != nil {
			t.Fatal(err)
		}
		cache := mustCache(t, Config{BlockSize: 16, CapacityBlocks: 2000})
		n, hits := 0, 0
		for {
			p, err := d.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			cached, _ := cache.Serve(p.Tokens)
			hits += cached
			n++
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if n != 300 || hits == 0 {
			t.Fatalf("%s: %d prompts, %d cached blocks", name, n, hits)
		}
	}
	if _, err := OpenTrace("/nonexistent/trace.jsonl", TraceConfig{}); err == nil {
		t.Error("OpenTrace of a missing file succeeded")
	}
}

func FuzzTraceDriver(f *testing.F) {
	f.Add([]byte(sampleTrace))
	f.Add([]byte(`{"timestamp": 1e3, "hash_ids": [18446744073709551615]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := NewTraceDriver(strings.NewReader(string(data)), TraceConfig{TokensPerBlock: 8, MaxPromptTokens: 1 << 12})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 100; i++ {
			p, err := d.Next()
			if err != nil {
				return
			}
			if len(p.Tokens) > 1<<12 || p.At < 0 {
				t.Fatalf("prompt of %d tokens at %v", len(p.Tokens), p.At)
			}
		}
	})
}
