package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// FaultKind is one kind of fault the harness injects.
type FaultKind uint8

// Fault kinds. The first six act on the messages the hop forwards (Fault.At
// is the ordinal of the message the hop received); the restarts act on the
// engine (Fault.At is the prompt they come before).
const (
	// Drop does not forward the message (a loss on the wire).
	Drop FaultKind = iota + 1
	// Duplicate forwards the message twice.
	Duplicate
	// Reorder holds the message back and forwards it after the next Arg
	// messages.
	Reorder
	// Truncate forwards the message without its payload frame: the
	// listener must drop it as malformed (counted) and repair the gap.
	Truncate
	// Corrupt forwards the message with a damaged payload (well framed, but
	// not a batch): the normalizer drops it and counts it.
	Corrupt
	// Cut closes the hop's PUB toward the router and binds it again; the
	// message and whatever is published until the router reconnects is lost.
	Cut
	// RestartWipe restarts the engine: seq back to its start, cache and
	// replay buffer empty (a fresh process).
	RestartWipe
	// RestartKeep restarts the engine's publisher: seq back to its start
	// and replay buffer empty, but the cache is kept.
	RestartKeep
	kindEnd
)

var kindNames = [...]string{"", "drop", "duplicate", "reorder", "truncate", "corrupt", "cut", "restart_wipe", "restart_keep"}

// String returns the kind's label.
func (k FaultKind) String() string {
	if k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("fault(%d)", uint8(k))
}

// OnMessage reports whether the fault acts on a message (else on the
// engine, between prompts).
func (k FaultKind) OnMessage() bool { return k >= Drop && k <= Cut }

// AllKinds lists every fault kind.
func AllKinds() []FaultKind {
	ks := make([]FaultKind, 0, kindEnd-1)
	for k := Drop; k < kindEnd; k++ {
		ks = append(ks, k)
	}
	return ks
}

// ParseKinds reads a comma-separated list of fault labels ("all" for every
// kind).
func ParseKinds(s string) ([]FaultKind, error) {
	if s == "all" {
		return AllKinds(), nil
	}
	var ks []FaultKind
	for _, name := range strings.Split(s, ",") {
		i := slices.Index(kindNames[:], strings.TrimSpace(name))
		if i <= 0 {
			return nil, fmt.Errorf("chaos: unknown fault kind %q (want %s)", name, strings.Join(kindNames[1:], ", "))
		}
		ks = append(ks, FaultKind(i))
	}
	return ks, nil
}

// Fault is one planned fault.
type Fault struct {
	At   int // message ordinal (message faults) or prompt index (restarts)
	Kind FaultKind
	Arg  int // Reorder: messages to wait; others: unused
}

// String formats the fault as "kind@at".
func (f Fault) String() string {
	if f.Kind == Reorder {
		return fmt.Sprintf("%s(%d)@%d", f.Kind, f.Arg, f.At)
	}
	return fmt.Sprintf("%s@%d", f.Kind, f.At)
}

// EnginePlan is what happens to one simulated engine in a trial.
type EnginePlan struct {
	// Prompts is how many prompts the engine serves.
	Prompts int
	// Replay gives the router the engine's replay endpoint.
	Replay bool
	// ReplayBuffer is the engine's replay buffer in batches; a small one
	// loses history, which the router must flag as degraded.
	ReplayBuffer int
	// Faults are sorted by kind group (message faults, then restarts) and At.
	Faults []Fault
	// ClearBefore, when > 0, empties the engine's cache (AllBlocksCleared)
	// before that prompt: whatever the faults before it cost, the stream
	// must be exact after it. NewPlan never sets it.
	ClearBefore int
}

// MessageFaults returns the faults acting on messages, keyed by ordinal.
func (p EnginePlan) MessageFaults() map[int]Fault {
	m := map[int]Fault{}
	for _, f := range p.Faults {
		if f.Kind.OnMessage() {
			m[f.At] = f
		}
	}
	return m
}

// Restarts returns the engine faults, keyed by the prompt they precede.
func (p EnginePlan) Restarts() map[int]FaultKind {
	m := map[int]FaultKind{}
	for _, f := range p.Faults {
		if !f.Kind.OnMessage() {
			m[f.At] = f.Kind
		}
	}
	return m
}

// Plan is one trial's faults: a pure value derived from a seed, so a seed
// names a trial.
type Plan struct {
	Seed    uint64
	Engines []EnginePlan
}

// String lists the plan on one line per engine.
func (p Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d", p.Seed)
	for i, e := range p.Engines {
		fmt.Fprintf(&b, "\n  engine %d: %d prompts, replay %v (buffer %d), faults %v", i, e.Prompts, e.Replay, e.ReplayBuffer, e.Faults)
	}
	return b.String()
}

// PlanConfig shapes the plans NewPlan draws.
type PlanConfig struct {
	// MaxEngines: each trial has 1..MaxEngines engines (default 2).
	MaxEngines int
	// Prompts per engine (default 24).
	Prompts int
	// Kinds are the fault kinds drawn (default AllKinds).
	Kinds []FaultKind
	// FaultRate is the chance that a message, or a prompt for restarts,
	// gets a fault (default 0.08).
	FaultRate float64
	// NoReplayRate is the chance an engine has no replay endpoint, and
	// SmallBufferRate that its replay buffer is only a few batches (defaults
	// 0.1 and 0.15).
	NoReplayRate, SmallBufferRate float64
}

func (c PlanConfig) withDefaults() PlanConfig {
	if c.MaxEngines <= 0 {
		c.MaxEngines = 2
	}
	if c.Prompts <= 0 {
		c.Prompts = 24
	}
	if len(c.Kinds) == 0 {
		c.Kinds = AllKinds()
	}
	if c.FaultRate == 0 {
		c.FaultRate = 0.08
	}
	if c.NoReplayRate == 0 {
		c.NoReplayRate = 0.1
	}
	if c.SmallBufferRate == 0 {
		c.SmallBufferRate = 0.15
	}
	return c
}

// largeBuffer is the replay buffer of an engine that keeps its history.
const largeBuffer = 10000

// NewPlan draws a trial's plan from seed. The same seed and config always
// give the same plan. Message faults fall on the first 2×Prompts messages
// (an engine publishes at most one batch per prompt, plus heartbeats), so
// the tail of a trial runs clean and can settle.
func NewPlan(seed uint64, cfg PlanConfig) Plan {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 0x6b76726f75746572)) // "kvrouter"
	var msgKinds, engKinds []FaultKind
	for _, k := range cfg.Kinds {
		if k.OnMessage() {
			msgKinds = append(msgKinds, k)
		} else {
			engKinds = append(engKinds, k)
		}
	}
	p := Plan{Seed: seed, Engines: make([]EnginePlan, 1+rng.IntN(cfg.MaxEngines))}
	for i := range p.Engines {
		e := EnginePlan{Prompts: cfg.Prompts, Replay: rng.Float64() >= cfg.NoReplayRate, ReplayBuffer: largeBuffer}
		if rng.Float64() < cfg.SmallBufferRate {
			e.ReplayBuffer = 2 + rng.IntN(6)
		}
		for at := range 2 * cfg.Prompts {
			if len(msgKinds) > 0 && rng.Float64() < cfg.FaultRate {
				f := Fault{At: at, Kind: msgKinds[rng.IntN(len(msgKinds))]}
				if f.Kind == Reorder {
					f.Arg = 1 + rng.IntN(3)
				}
				e.Faults = append(e.Faults, f)
			}
		}
		for at := 1; at < cfg.Prompts; at++ {
			if len(engKinds) > 0 && rng.Float64() < cfg.FaultRate/2 {
				e.Faults = append(e.Faults, Fault{At: at, Kind: engKinds[rng.IntN(len(engKinds))]})
			}
		}
		p.Engines[i] = e
	}
	return p
}
