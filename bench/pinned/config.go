package pinned

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Config shapes a pinned run. DefaultConfig and QuickConfig are the
// presets; zero fields are not filled in (Validate says what is missing).
type Config struct {
	// KVRouter is the kvrouter binary (serve and sim run from it).
	KVRouter string
	// Floor is the floor server's command line; the harness appends
	// --http ADDR (kvrouter-bench floor-server).
	Floor []string
	// Rates are the offered /route rates, requests/s, at each ingest rate.
	Rates []float64
	// Ingest are the engines' total offered ingest rates, stored blocks/s.
	Ingest []float64
	// Engines is the number of simulated engine processes; each offers
	// Ingest/Engines blocks/s and starts at its own slice of the trace.
	Engines int
	// EngineNice is the engines' nice value (nice -n): they share the
	// generator's core and take what the generator leaves, so an
	// overloaded core shows as ingest below the offered rate, not as a
	// late generator.
	EngineNice int
	// Nice is the nice value of the generator, the router and the floor
	// (below 0 needs CAP_SYS_NICE). On a machine shared with other jobs,
	// pinning gives each measured process only its share of its core; a
	// raised priority gives it the core back, so the point measures the
	// router and its floor rather than the neighbours. EngineNice stays
	// absolute (at least Nice).
	Nice int
	// Capacity is each engine's cache, in blocks.
	Capacity int
	// Warmup is offered at each point's rate before Duration; its requests
	// are not measured.
	Warmup, Duration time.Duration
	// Fill: before the router's points, wait until every rank is exact and
	// holds Fill × Capacity blocks, or FillTimeout has passed (the report
	// says how full it was).
	Fill        float64
	FillTimeout time.Duration
	// Trace, TokensPerBlock and Seed: the prompts, as the engines expand
	// them; /route bodies are the same prompts.
	Trace          string
	TokensPerBlock int
	Seed           uint64
	// Shards is serve's --shards.
	Shards int
	// RouterCPU runs the router under test and the floor; LoadCPU the
	// generator (this process) and the engines. Pin false runs unpinned.
	RouterCPU, LoadCPU int
	Pin                bool
	// MaxConns caps the generator's concurrent requests; Timeout one
	// request (a timed-out request is an error, not a latency).
	// DefaultMaxConns is gentler than vegeta's 4,096: a stalled server
	// otherwise gets thousands of connections piled on it, each a
	// goroutine it schedules, and the point measures the pile.
	MaxConns int
	Timeout  time.Duration
	// RouterProfile, when set, is where a CPU profile of the router
	// process is written: taken over the measured part of the first point
	// at ProfileRate (serve --pprof-listen on loopback).
	RouterProfile string
	ProfileRate   float64
	// Progress, when set, gets a line per step.
	Progress io.Writer
}

// DefaultMaxConns is the generator's default cap on concurrent requests.
const DefaultMaxConns = 512

// DefaultConfig is the full table: 1k, 5k, 10k and 20k req/s at 100k and
// 500k blocks/s of ingest, 5 s per point after 1 s of warm-up.
func DefaultConfig() Config {
	return Config{
		Rates: []float64{1000, 5000, 10000, 20000}, Ingest: []float64{100_000, 500_000},
		Engines: 4, EngineNice: 19, Capacity: 65536, Warmup: time.Second, Duration: 5 * time.Second,
		Fill: 0.9, FillTimeout: 30 * time.Second,
		Trace: "builtin:conversation", TokensPerBlock: 16, Seed: 1, Shards: 1,
		RouterCPU: 0, LoadCPU: 1, Pin: true, MaxConns: DefaultMaxConns, Timeout: 5 * time.Second,
	}
}

// QuickConfig is a smoke run: 1k and 5k req/s at 100k blocks/s, 2
// engines, 2 s points.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Rates, c.Ingest, c.Engines = []float64{1000, 5000}, []float64{100_000}, 2
	c.Warmup, c.Duration, c.FillTimeout = 500*time.Millisecond, 2*time.Second, 15*time.Second
	return c
}

// Validate reports the first unusable field.
func (c Config) Validate() error {
	switch {
	case c.KVRouter == "":
		return errors.New("pinned: no kvrouter binary")
	case len(c.Floor) == 0:
		return errors.New("pinned: no floor server command")
	case len(c.Rates) == 0 || len(c.Ingest) == 0:
		return errors.New("pinned: rates and ingest rates must not be empty")
	case c.EngineNice < 0 || c.EngineNice > 19:
		return fmt.Errorf("pinned: engine nice %d: want 0..19", c.EngineNice)
	case c.Nice < -20 || c.Nice > c.EngineNice:
		return fmt.Errorf("pinned: nice %d: want -20..%d (the engines' nice at most)", c.Nice, c.EngineNice)
	case c.Engines <= 0 || c.Capacity <= 0 || c.TokensPerBlock <= 0 || c.Shards <= 0 || c.MaxConns <= 0:
		return errors.New("pinned: engines, capacity, tokens per block, shards and max connections must be positive")
	case c.Duration <= 0 || c.Warmup < 0 || c.Timeout <= 0 || c.FillTimeout < 0 || c.Fill < 0 || c.Fill > 1:
		return errors.New("pinned: duration and timeout must be positive, warm-up and fill timeout not negative, fill within 0..1")
	case c.RouterCPU < 0 || c.LoadCPU < 0 || c.Pin && c.RouterCPU == c.LoadCPU:
		return fmt.Errorf("pinned: router cpu %d and load cpu %d must be distinct and not negative", c.RouterCPU, c.LoadCPU)
	}
	for _, r := range c.Rates {
		if r <= 0 || r*c.Duration.Seconds() < 1 {
			return fmt.Errorf("pinned: rate %v must offer at least one request per point", r)
		}
	}
	if c.RouterProfile != "" && !slices.Contains(c.Rates, c.ProfileRate) {
		return fmt.Errorf("pinned: profile rate %v is none of the rates %v", c.ProfileRate, c.Rates)
	}
	for _, r := range c.Ingest {
		if r <= 0 {
			return fmt.Errorf("pinned: ingest rate %v must be positive", r)
		}
	}
	return nil
}
