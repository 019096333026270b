package simengine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kvrouter/kvrouter/bench/traces"
)

// MooncakeBlockTokens is the block size of Mooncake trace hash_ids.
const MooncakeBlockTokens = 512

// TraceConfig shapes a TraceDriver. Zero values take the defaults noted.
type TraceConfig struct {
	// TokensPerBlock is how many tokens each hash_id expands to (default
	// MooncakeBlockTokens; tests use 16 to keep prompts small).
	TokensPerBlock int
	// Limit stops after this many requests without reading further; 0 reads
	// the whole trace.
	Limit int
	// Vocab bounds the generated token ids (default 151936).
	Vocab uint32
	// Seed changes the token run of every id (two simulators with different
	// seeds share no prefixes).
	Seed uint64
	// MaxPromptTokens rejects a line whose prompt would be longer (default
	// 1<<20, kvrouter's per-event token limit).
	MaxPromptTokens int
}

// TraceDriver replays a Mooncake JSONL trace: one request per line with
// timestamp (ms), input_length, output_length and hash_ids, each id one
// 512-token block where equal ids mean equal prefix blocks.
//
// Token expansion: hash_id h becomes a run of TokensPerBlock tokens derived
// from (Seed, h) alone, so equal ids give equal tokens anywhere. The prompt is
// the ids' runs concatenated, then cut to input_length scaled by
// TokensPerBlock/512 (rounded up) — so, as in the trace, the last block is
// usually partial (and so not cached). The cut never drops a whole id: it
// is clamped to keep at least one token of the last id.
//
// Lines are read one at a time; with a Limit nothing past the Limit-th
// request is read.
type TraceDriver struct {
	cfg  TraceConfig
	sc   *bufio.Scanner
	line int
	n    int
	file io.Closer
}

// traceLine is one Mooncake record.
type traceLine struct {
	Timestamp    *int64   `json:"timestamp"`
	InputLength  *int64   `json:"input_length"`
	OutputLength int64    `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

// NewTraceDriver reads a trace from r.
func NewTraceDriver(r io.Reader, cfg TraceConfig) (*TraceDriver, error) {
	if cfg.TokensPerBlock == 0 {
		cfg.TokensPerBlock = MooncakeBlockTokens
	}
	if cfg.Vocab == 0 {
		cfg.Vocab = 151936
	}
	if cfg.MaxPromptTokens == 0 {
		cfg.MaxPromptTokens = 1 << 20
	}
	if cfg.TokensPerBlock < 0 || cfg.Limit < 0 || cfg.MaxPromptTokens < 0 {
		return nil, fmt.Errorf("simengine: trace config has a negative value: %+v", cfg)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return &TraceDriver{cfg: cfg, sc: sc}, nil
}

// OpenTrace opens trace reference ref (traces.OpenRef): an embedded trace
// such as "builtin:conversation", or a file path ("-" is not special:
// pass os.Stdin to NewTraceDriver instead). Close releases it.
func OpenTrace(ref string, cfg TraceConfig) (*TraceDriver, error) {
	f, err := traces.OpenRef(ref)
	if err != nil {
		return nil, fmt.Errorf("simengine: open trace: %w", err)
	}
	d, err := NewTraceDriver(f, cfg)
	if err != nil {
		f.Close()
		return nil, err
	}
	d.file = f
	return d, nil
}

// Close closes the trace OpenTrace opened; it is a no-op otherwise.
func (d *TraceDriver) Close() error {
	if d.file == nil {
		return nil
	}
	err := d.file.Close()
	d.file = nil
	return err
}

// Next returns the next request, io.EOF at the end of the trace or after
// Limit requests, or an error naming the bad line.
func (d *TraceDriver) Next() (Prompt, error) {
	if d.cfg.Limit > 0 && d.n >= d.cfg.Limit {
		return Prompt{}, io.EOF
	}
	for d.sc.Scan() {
		d.line++
		raw := bytes.TrimSpace(d.sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		p, err := d.parse(raw)
		if err != nil {
			return Prompt{}, fmt.Errorf("simengine: trace line %d: %w", d.line, err)
		}
		d.n++
		return p, nil
	}
	if err := d.sc.Err(); err != nil {
		return Prompt{}, fmt.Errorf("simengine: trace after line %d: %w", d.line, err)
	}
	return Prompt{}, io.EOF
}

func (d *TraceDriver) parse(raw []byte) (Prompt, error) {
	var l traceLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return Prompt{}, err
	}
	if l.Timestamp == nil {
		return Prompt{}, errors.New("no timestamp")
	}
	if *l.Timestamp < 0 || *l.Timestamp > int64(time.Duration(1<<62)/time.Millisecond) {
		return Prompt{}, fmt.Errorf("timestamp %d ms out of range", *l.Timestamp)
	}
	tpb := d.cfg.TokensPerBlock
	if len(l.HashIDs) > d.cfg.MaxPromptTokens/max(tpb, 1) {
		return Prompt{}, fmt.Errorf("%d hash ids × %d tokens exceed the %d-token limit", len(l.HashIDs), tpb, d.cfg.MaxPromptTokens)
	}
	n := len(l.HashIDs) * tpb
	if l.InputLength != nil && len(l.HashIDs) > 0 {
		il := *l.InputLength
		if il < 0 {
			return Prompt{}, fmt.Errorf("input_length %d", il)
		}
		il = min(il, int64(len(l.HashIDs))*MooncakeBlockTokens)
		scaled := int((il*int64(tpb) + MooncakeBlockTokens - 1) / MooncakeBlockTokens)
		n = max(min(scaled, n), n-tpb+1)
	}
	tokens := make([]uint32, 0, n)
	for _, id := range l.HashIDs {
		tokens = d.appendRun(tokens, id)
	}
	return Prompt{
		Tokens:       tokens[:n],
		At:           time.Duration(*l.Timestamp) * time.Millisecond,
		OutputTokens: int(max(l.OutputLength, 0)),
	}, nil
}

// appendRun appends hash id's token run.
func (d *TraceDriver) appendRun(dst []uint32, id uint64) []uint32 {
	base := splitmix64(id ^ splitmix64(d.cfg.Seed))
	for j := 0; j < d.cfg.TokensPerBlock; j++ {
		dst = append(dst, uint32(splitmix64(base+uint64(j))%uint64(d.cfg.Vocab)))
	}
	return dst
}

// splitmix64 is a bijective 64-bit mixer (Steele et al.).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
