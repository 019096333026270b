package simengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

// twoLineTrace has two requests of two 16-token blocks each, sharing none.
const twoLineTrace = `{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [3, 4]}
`

func twoLines(t *testing.T) Driver {
	d, err := NewTraceDriver(strings.NewReader(twoLineTrace), TraceConfig{TokensPerBlock: 16})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// failing is a Driver whose every Next fails.
type failing struct{}

func (failing) Next() (Prompt, error) { return Prompt{}, errors.New("no trace") }

// Loop replays the trace from its start at each end; an empty source ends
// it instead of spinning, and an error of the source is returned.
func TestLoopReplaysTheTrace(t *testing.T) {
	d, err := Loop(twoLines(t))
	if err != nil {
		t.Fatal(err)
	}
	var firsts []uint32
	for range 5 {
		p, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, p.Tokens[0])
	}
	if firsts[0] == firsts[1] || firsts[0] != firsts[2] || firsts[1] != firsts[3] || firsts[0] != firsts[4] {
		t.Errorf("first tokens of 5 looped prompts: %v, want a, b, a, b, a", firsts)
	}
	none, _ := NewTraceDriver(strings.NewReader(""), TraceConfig{})
	empty, err := Loop(none)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := empty.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("looped empty trace: %v, want io.EOF", err)
	}
	if _, err := Loop(failing{}); err == nil || err.Error() != "no trace" {
		t.Errorf("looped failing open: %v", err)
	}
}

// With BlockRate, the next request waits until the blocks already stored
// are due: at 1 block/s, after a first request of 2 stored blocks the
// second is 2 s away, so a cancel before then leaves one request served.
func TestRunPacesByStoredBlocks(t *testing.T) {
	e := newTestEngine(t, Options{BlockSize: 16}, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	d, err := Loop(twoLines(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- e.Run(ctx, RunConfig{Driver: d, BlockRate: 1}) }()
	eventually.True(t, "the first request is served", func() (bool, string) {
		s := e.Stats().Cache
		return s.Requests >= 1, fmt.Sprintf("requests %d", s.Requests)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := e.Stats().Cache; s.Requests != 1 || s.StoredBlocks != 2 {
		t.Errorf("requests %d, stored %d; want 1 and 2", s.Requests, s.StoredBlocks)
	}
	if err := e.Run(context.Background(), RunConfig{Driver: d, BlockRate: -1}); err == nil {
		t.Error("a negative block rate was accepted")
	}
}
