package loadgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/bench/traces"
)

// Request is one trace request, expanded to tokens.
type Request struct {
	Tokens  []uint32
	HashIDs []uint64 // the trace's ids (one per 512-token block)
	Session string   // inferred conversation (InferSessions)
	At      time.Duration
	// Follows, when positive, is how long after the previous request this
	// one arrives in the engine model, off its clock: a burst sibling
	// (burst.go, ArrivalTimes).
	Follows time.Duration
}

// TraceOptions select and expand a trace.
type TraceOptions struct {
	TokensPerBlock int    // tokens per hash_id
	Limit          int    // requests to read; 0: all
	Seed           uint64 // token-run seed (simengine.TraceConfig.Seed): another seed gives unrelated prompts
}

// LoadTrace reads a Mooncake JSONL trace, named by a trace reference
// (traces.OpenRef: "builtin:conversation" or a file path): the tokens come
// from simengine.TraceDriver (equal ids give equal token runs), the hash
// ids from the same lines, and the sessions from InferSessions.
//
// A reference with GeneratedPrefix is generated instead (agentic.go).
func LoadTrace(path string, opt TraceOptions) ([]Request, error) {
	if strings.HasPrefix(path, GeneratedPrefix) {
		return generated(path, opt)
	}
	data, err := readTrace(path)
	if err != nil {
		return nil, fmt.Errorf("loadgen: read trace: %w", err)
	}
	drv, err := simengine.NewTraceDriver(bytes.NewReader(data),
		simengine.TraceConfig{TokensPerBlock: opt.TokensPerBlock, Limit: opt.Limit, Seed: opt.Seed})
	if err != nil {
		return nil, err
	}
	ids, err := traceIDs(data, opt.Limit)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %s: %w", path, err)
	}
	reqs := make([]Request, 0, len(ids))
	for {
		p, err := drv.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("loadgen: %s: %w", path, err)
		}
		reqs = append(reqs, Request{Tokens: p.Tokens, At: p.At})
	}
	if len(reqs) != len(ids) {
		return nil, fmt.Errorf("loadgen: %s: %d requests but %d hash-id lines", path, len(reqs), len(ids))
	}
	sessions := InferSessions(ids)
	for i := range reqs {
		reqs[i].HashIDs, reqs[i].Session = ids[i], sessions[i]
	}
	return reqs, nil
}

// traceIDs reads the hash_ids of each non-blank line (as TraceDriver
// counts lines), at most limit lines when limit > 0.
func traceIDs(data []byte, limit int) ([][]uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var out [][]uint64
	for line := 1; sc.Scan() && (limit == 0 || len(out) < limit); line++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l struct {
			HashIDs []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, l.HashIDs)
	}
	return out, sc.Err()
}

// readTrace reads all of trace reference ref.
func readTrace(ref string) ([]byte, error) {
	r, err := traces.OpenRef(ref)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(r)
	return data, errors.Join(err, r.Close())
}
