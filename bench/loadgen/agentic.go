package loadgen

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/bench/traces"
)

// AgenticTrace is the reference of the generated third workload (kvrouter-bench
// --trace gen:agentic).
const AgenticTrace = GeneratedPrefix + "agentic"

// GeneratedPrefix marks a trace reference to a generated workload.
const GeneratedPrefix = "gen:"

// AgenticConfig shapes the generated workload: many tenants, each with a
// long system prompt shared by all its sessions, tenants chosen with Zipf
// popularity, and short agentic sessions (a few turns, each prompt the
// previous one plus the answer and a tool result or user message).
type AgenticConfig struct {
	Requests int    // requests to generate
	Seed     uint64 // the same seed gives the same requests
	Tenants  int
	// SystemMin, SystemMax bound a tenant's system prompt, in tokens.
	SystemMin, SystemMax int
	// ZipfS is the Zipf exponent of tenant popularity (> 1).
	ZipfS float64
	// TurnsMin, TurnsMax bound a session's requests.
	TurnsMin, TurnsMax int
	// StepMin, StepMax bound the tokens a turn appends (answer + message).
	StepMin, StepMax int
	// Open is how many sessions are under way at once; each request
	// advances one of them, chosen uniformly.
	Open int
}

// DefaultAgentic is the workload kvrouter-bench reports beside the
// Mooncake traces: 12,000 requests (the conversation trace's size), 256
// tenants with 512–2,048-token system prompts at Zipf exponent 1.1,
// sessions of 2–6 turns adding 64–384 tokens each, 64 sessions open at
// once. Requests share their session's token array (read only).
func DefaultAgentic() AgenticConfig {
	return AgenticConfig{Requests: 12000, Seed: 1, Tenants: 256, SystemMin: 512, SystemMax: 2048, ZipfS: 1.1,
		TurnsMin: 2, TurnsMax: 6, StepMin: 64, StepMax: 384, Open: 64}
}

// generated returns the generated workload named by ref (AgenticTrace or
// BurstTrace), opt.Limit requests (0: the default count), opt.Seed
// shifting the seed.
func generated(ref string, opt TraceOptions) ([]Request, error) {
	if ref == BurstTrace {
		cfg := DefaultBurst()
		cfg.Seed += opt.Seed
		if opt.Limit > 0 {
			cfg.Requests = opt.Limit
		}
		return GenerateBurst(cfg), nil
	}
	if ref != AgenticTrace {
		return nil, fmt.Errorf("loadgen: unknown generated workload %q (want %s or %s)", ref, AgenticTrace, BurstTrace)
	}
	cfg := DefaultAgentic()
	cfg.Seed += opt.Seed
	if opt.Limit > 0 {
		cfg.Requests = opt.Limit
	}
	return GenerateAgentic(cfg), nil
}

// agenticVocab is the token id range of generated prompts.
const agenticVocab = 32000

// GenerateAgentic returns cfg's requests, deterministic in cfg. Each
// session's id is "a<n>"; requests arrive 50 ms apart.
func GenerateAgentic(cfg AgenticConfig) []Request {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6167656e))
	zipf := rand.NewZipf(rng, cfg.ZipfS, 1, uint64(max(cfg.Tenants, 1)-1))
	system := make([][]uint32, cfg.Tenants)
	for t := range system {
		r := rand.New(rand.NewPCG(cfg.Seed, uint64(t)<<1|1))
		system[t] = tokenRun(r, cfg.SystemMin+r.IntN(cfg.SystemMax-cfg.SystemMin+1))
	}
	type session struct {
		id     string
		rng    *rand.Rand
		prompt []uint32
		left   int
	}
	next := 0
	open := func() *session {
		s := &session{id: "a" + strconv.Itoa(next), rng: rand.New(rand.NewPCG(cfg.Seed, uint64(next)<<1))}
		next++
		t := int(zipf.Uint64())
		s.left = cfg.TurnsMin + s.rng.IntN(cfg.TurnsMax-cfg.TurnsMin+1)
		s.prompt = append([]uint32(nil), system[t]...)
		return s
	}
	live := make([]*session, cfg.Open)
	for i := range live {
		live[i] = open()
	}
	out := make([]Request, 0, cfg.Requests)
	for i := range cfg.Requests {
		k := rng.IntN(len(live))
		s := live[k]
		s.prompt = append(s.prompt, tokenRun(s.rng, cfg.StepMin+s.rng.IntN(cfg.StepMax-cfg.StepMin+1))...)
		out = append(out, Request{Tokens: s.prompt[:len(s.prompt):len(s.prompt)], Session: s.id, At: time.Duration(i) * 50 * time.Millisecond})
		if s.left--; s.left == 0 {
			live[k] = open()
		}
	}
	return out
}

func tokenRun(r *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(r.IntN(agenticVocab))
	}
	return out
}

// TraceLabel names a trace reference in reports: the embedded trace's
// name, the generated workload's, or the file's (traces.Label).
func TraceLabel(ref string) string {
	if name, ok := strings.CutPrefix(ref, GeneratedPrefix); ok {
		return name
	}
	return traces.Label(ref)
}
