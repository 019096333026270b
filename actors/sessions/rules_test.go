package sessions

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// step is one Apply at t0 + at.
type step struct {
	ev messages.RouterEvent
	at time.Duration
}

func steps(evs ...messages.RouterEvent) []step {
	out := make([]step, len(evs))
	for i, ev := range evs {
		out[i] = step{ev: ev}
	}
	return out
}

func TestRules(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		steps   []step
		want    map[string][]hs // sessions held, holders newest first
		reasons map[Reason]uint64
	}{
		{
			name:  "chain extends",
			steps: steps(st(1, 0, "s1", noParent, 1, 2), st(1, 0, "s1", 2, 3)),
			want:  map[string][]hs{"s1": {{wk(1, 0), 3, 3, 3}}},
		},
		{
			name:    "scoped to the reporting worker: parent on another worker is unknown",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), st(2, 0, "s1", 2, 3)),
			want:    map[string][]hs{"s1": {{wk(2, 0), 1, 1, 3}, {wk(1, 0), 2, 2, 2}}},
			reasons: map[Reason]uint64{ReasonUnknownParent: 1},
		},
		{
			name:    "scoped to the dp rank",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), st(1, 1, "s1", 2, 3)),
			want:    map[string][]hs{"s1": {{wk(1, 1), 1, 1, 3}, {wk(1, 0), 2, 2, 2}}},
			reasons: map[Reason]uint64{ReasonUnknownParent: 1},
		},
		{
			name:    "same hashes on another worker are other blocks: remove there prunes nothing here",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), st(2, 0, "s2", noParent, 1, 2), rm(2, 0, 1, 2), rm(1, 1, 1, 2)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 2}}},
			reasons: map[Reason]uint64{ReasonPruned: 2},
		},
		{
			name:    "unattributed stores join no session",
			steps:   steps(st(1, 0, "", noParent, 1, 2), st(1, 0, "s1", 2, 3)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 1, 1, 3}}},
			reasons: map[Reason]uint64{ReasonUnattributed: 1, ReasonUnknownParent: 1},
		},
		{
			name:    "Dynamo's unattributed stand-in is unattributed",
			steps:   steps(st(1, 0, routerevent.UnattributedSessionID, noParent, 1, 2)),
			want:    map[string][]hs{},
			reasons: map[Reason]uint64{ReasonUnattributed: 1},
		},
		{
			name: "invalid session ids are rejected and counted",
			steps: steps(
				st(1, 0, strings.Repeat("x", DefaultMaxIDLen+1), noParent, 1),
				st(1, 0, "has space", noParent, 1),
				st(1, 0, "tab\t", noParent, 1),
				st(1, 0, "ünï", noParent, 1),
				st(1, 0, "nul\x00", noParent, 1),
				st(1, 0, strings.Repeat("x", DefaultMaxIDLen), noParent, 1),
			),
			want:    map[string][]hs{strings.Repeat("x", DefaultMaxIDLen): {{wk(1, 0), 1, 1, 1}}},
			reasons: map[Reason]uint64{ReasonInvalidSessionID: 5},
		},
		{
			name:    "remove prunes the block and everything below it",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2, 3, 4), rm(1, 0, 3)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 2}}},
			reasons: map[Reason]uint64{ReasonPruned: 2},
		},
		{
			name:    "remove prunes every session of the stream",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), st(1, 0, "s2", noParent, 1, 2, 5), rm(1, 0, 2)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 1, 1, 1}}, "s2": {{wk(1, 0), 1, 1, 1}}},
			reasons: map[Reason]uint64{ReasonPruned: 3},
		},
		{
			name:    "remove of a whole lineage drops the session",
			steps:   steps(st(1, 0, "s1", noParent, 1), st(1, 0, "s2", noParent, 7), rm(1, 0, 1)),
			want:    map[string][]hs{"s2": {{wk(1, 0), 1, 1, 7}}},
			reasons: map[Reason]uint64{ReasonPruned: 1},
		},
		{
			name:    "remove of a fork keeps the other branch; newest falls back to the last live block",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2, 3), st(1, 0, "s1", 1, 4, 5), rm(1, 0, 4)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 3, 3, 3}}},
			reasons: map[Reason]uint64{ReasonPruned: 2},
		},
		{
			name: "a block held on another tier survives a remove",
			steps: steps(st(1, 0, "s1", noParent, 1, 2), onTier(st(1, 0, "", 1, 2), messages.TierHost),
				rm(1, 0, 2)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 2}}},
			reasons: map[Reason]uint64{ReasonUnattributed: 1},
		},
		{
			name: "offload adds a tier; removing both drops the block",
			steps: steps(st(1, 0, "s1", noParent, 1, 2), onTier(offl(1, 0, 2), messages.TierDisk),
				rm(1, 0, 2), onTier(rm(1, 0, 2), messages.TierDisk)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 1, 1, 1}}},
			reasons: map[Reason]uint64{ReasonPruned: 1},
		},
		{
			name:  "remove on a tier the block is not on is a no-op",
			steps: steps(st(1, 0, "s1", noParent, 1), onTier(rm(1, 0, 1), messages.TierHost)),
			want:  map[string][]hs{"s1": {{wk(1, 0), 1, 1, 1}}},
		},
		{
			name:    "clear prunes that rank only",
			steps:   steps(st(1, 0, "s1", noParent, 1), st(1, 1, "s1", noParent, 2), st(2, 0, "s2", noParent, 3), clr(1, 0)),
			want:    map[string][]hs{"s1": {{wk(1, 1), 1, 1, 2}}, "s2": {{wk(2, 0), 1, 1, 3}}},
			reasons: map[Reason]uint64{ReasonCleared: 1},
		},
		{
			name:    "clear of a session's only holder drops it; stores after the clear start over",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), clr(1, 0), st(1, 0, "s2", 2, 3)),
			want:    map[string][]hs{"s2": {{wk(1, 0), 1, 1, 3}}},
			reasons: map[Reason]uint64{ReasonCleared: 1, ReasonUnknownParent: 1},
		},
		{
			name:  "fork from the middle: newest is the fork's tip",
			steps: steps(st(1, 0, "s1", noParent, 1, 2, 3), st(1, 0, "s1", 2, 4)),
			want:  map[string][]hs{"s1": {{wk(1, 0), 3, 4, 4}}},
		},
		{
			name:  "duplicate store under the same parent changes nothing",
			steps: steps(st(1, 0, "s1", noParent, 1, 2, 3), st(1, 0, "s1", 1, 2), st(1, 0, "s1", noParent, 1)),
			want:  map[string][]hs{"s1": {{wk(1, 0), 3, 3, 3}}},
		},
		{
			name:    "conflicting parent ends the event",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), st(1, 0, "s1", noParent, 9, 2, 10)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 1, 3, 9}}},
			reasons: map[Reason]uint64{ReasonConflictingParent: 1},
		},
		{
			name:    "cycle: a block under itself",
			steps:   steps(st(1, 0, "s1", noParent, 1), st(1, 0, "s1", 5, 5)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 1, 1, 1}}},
			reasons: map[Reason]uint64{ReasonUnknownParent: 1, ReasonCycle: 1},
		},
		{
			name:    "cycle: a block under its descendant",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2, 3), st(1, 0, "s1", 3, 1)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 3, 3, 3}}},
			reasons: map[Reason]uint64{ReasonCycle: 1},
		},
		{
			name:    "cycle inside one chain",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2, 1, 4)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 2}}},
			reasons: map[Reason]uint64{ReasonCycle: 1},
		},
		{
			name:    "cycle through a segment's anchor",
			steps:   steps(st(1, 0, "s1", 9, 5, 6), st(1, 0, "s1", 6, 9)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 6}}},
			reasons: map[Reason]uint64{ReasonUnknownParent: 1, ReasonCycle: 1},
		},
		{
			name:    "unknown parent starts a new segment",
			steps:   steps(st(1, 0, "s1", noParent, 1, 2), st(1, 0, "s1", 99, 7, 8)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 4, 8}}},
			reasons: map[Reason]uint64{ReasonUnknownParent: 1},
		},
		{
			name:    "LRU: the least recently stored session is evicted",
			cfg:     Config{MaxSessions: 2},
			steps:   steps(st(1, 0, "s1", noParent, 1), st(1, 0, "s2", noParent, 2), st(1, 0, "s1", 1, 3), st(1, 0, "s3", noParent, 4)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 3}}, "s3": {{wk(1, 0), 1, 1, 4}}},
			reasons: map[Reason]uint64{ReasonEvicted: 1},
		},
		{
			name:    "LRU: a duplicate store counts as use",
			cfg:     Config{MaxSessions: 2},
			steps:   steps(st(1, 0, "s1", noParent, 1), st(1, 0, "s2", noParent, 2), st(1, 0, "s1", noParent, 1), st(1, 0, "s3", noParent, 4)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 1, 1, 1}}, "s3": {{wk(1, 0), 1, 1, 4}}},
			reasons: map[Reason]uint64{ReasonEvicted: 1},
		},
		{
			name:    "MaxBlocks evicts whole LRU sessions, never the one stored to",
			cfg:     Config{MaxBlocks: 4},
			steps:   steps(st(1, 0, "s1", noParent, 1, 2, 3), st(1, 0, "s2", noParent, 4, 5), st(1, 0, "s2", 5, 6, 7, 8)),
			want:    map[string][]hs{"s2": {{wk(1, 0), 5, 5, 8}}},
			reasons: map[Reason]uint64{ReasonEvicted: 1},
		},
		{
			name: "MaxDepth drops the oldest blocks down to 7/8; the survivors are a new segment",
			cfg:  Config{MaxDepth: 8},
			steps: steps(st(1, 0, "s1", noParent, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
				st(1, 0, "s1", 10, 11)),
			want:    map[string][]hs{"s1": {{wk(1, 0), 8, 8, 11}}},
			reasons: map[Reason]uint64{ReasonDepthDropped: 3},
		},
		{
			name: "MaxDepth: a dropped block's children keep its hash as anchor (cycle check, duplicate check)",
			cfg:  Config{MaxDepth: 2},
			steps: steps(st(1, 0, "s1", noParent, 1, 2, 3),
				st(1, 0, "s1", 1, 2),        // 1 is gone (unknown parent), 2 starts a segment under 1: duplicate
				st(1, 0, "s1", noParent, 3), // 3 under 2, not a root: conflicting
				st(1, 0, "s1", 3, 1)),       // 1 is 3's segment anchor: cycle
			want:    map[string][]hs{"s1": {{wk(1, 0), 2, 2, 3}}},
			reasons: map[Reason]uint64{ReasonDepthDropped: 1, ReasonUnknownParent: 1, ReasonConflictingParent: 1, ReasonCycle: 1},
		},
		{
			name: "MaxHolders drops the session's least recently stored lineage",
			cfg:  Config{MaxHolders: 2},
			steps: steps(st(1, 0, "s1", noParent, 1), st(2, 0, "s1", noParent, 2), st(1, 0, "s1", 1, 3),
				st(3, 0, "s1", noParent, 4)),
			want:    map[string][]hs{"s1": {{wk(3, 0), 1, 1, 4}, {wk(1, 0), 2, 2, 3}}},
			reasons: map[Reason]uint64{ReasonHolderDropped: 1},
		},
		{
			name:    "MaxHolders 1 moves a session from worker to worker",
			cfg:     Config{MaxHolders: 1},
			steps:   steps(st(1, 0, "s1", noParent, 1), st(2, 0, "s1", noParent, 2)),
			want:    map[string][]hs{"s1": {{wk(2, 0), 1, 1, 2}}},
			reasons: map[Reason]uint64{ReasonHolderDropped: 1},
		},
		{
			name: "idle sessions expire",
			cfg:  Config{IdleTTL: 10 * time.Second},
			steps: []step{
				{st(1, 0, "s1", noParent, 1), 0},
				{st(1, 0, "s2", noParent, 2), 5 * time.Second},
				{st(1, 0, "s2", 2, 3), 10 * time.Second}, // s1 expires first
			},
			want:    map[string][]hs{"s2": {{wk(1, 0), 2, 2, 3}}},
			reasons: map[Reason]uint64{ReasonExpired: 1},
		},
		{
			name: "a store keeps a session alive; removes do not",
			cfg:  Config{IdleTTL: 10 * time.Second},
			steps: []step{
				{st(1, 0, "s1", noParent, 1, 2), 0},
				{st(1, 0, "s1", 2, 3), 9 * time.Second},
				{rm(1, 0, 3), 15 * time.Second},
				{rm(1, 0, 9), 19 * time.Second},
			},
			want:    map[string][]hs{},
			reasons: map[Reason]uint64{ReasonExpired: 1, ReasonPruned: 1},
		},
		{
			name:  "an empty store creates nothing",
			steps: steps(st(1, 0, "s1", 5)),
			want:  map[string][]hs{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := New(tc.cfg)
			for _, s := range tc.steps {
				x.Apply(s.ev, t0.Add(s.at))
				checkInvariants(t, x)
			}
			got := map[string][]hs{}
			for s := range x.sessions.all() {
				got[s.id] = summary(x.Holders(s.id))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("sessions %v, want %v", got, tc.want)
			}
			for id, want := range tc.want {
				if !slices.Equal(got[id], want) {
					t.Errorf("session %q: holders %v, want %v", id, got[id], want)
				}
			}
			stats := x.Stats()
			for r := ReasonNone + 1; r < ReasonCount; r++ {
				if stats.Reasons[r] != tc.reasons[r] {
					t.Errorf("%s: %d, want %d", r, stats.Reasons[r], tc.reasons[r])
				}
			}
			if stats.Sessions != len(tc.want) {
				t.Errorf("Stats.Sessions %d, want %d", stats.Sessions, len(tc.want))
			}
		})
	}
}

func TestApplyReturnsReason(t *testing.T) {
	x := New(Config{})
	for _, tc := range []struct {
		ev   messages.RouterEvent
		want Reason
	}{
		{st(1, 0, "s1", noParent, 1, 2), ReasonNone},
		{st(1, 0, "s1", 7, 8), ReasonUnknownParent},
		{st(1, 0, "s1", 8, 8), ReasonCycle},
		{st(1, 0, "s1", 7, 2), ReasonConflictingParent},
		{st(1, 0, "", noParent, 3), ReasonUnattributed},
		{st(1, 0, "a b", noParent, 3), ReasonInvalidSessionID},
		{rm(1, 0, 1), ReasonNone},
	} {
		if got := x.Apply(tc.ev, t0); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.ev, got, tc.want)
		}
	}
}

func TestGetForgetDropWorker(t *testing.T) {
	x := New(Config{})
	x.Apply(st(1, 0, "s1", noParent, 1, 2, 3), t0)
	x.Apply(st(1, 0, "s1", 2, 4), t0.Add(time.Second)) // fork
	x.Apply(st(2, 1, "s1", 50, 5), t0.Add(2*time.Second))
	x.Apply(st(1, 0, "s2", noParent, 1), t0)

	s, ok := x.Get("s1")
	if !ok || s.ID != "s1" || !s.LastSeen.Equal(t0.Add(2*time.Second)) || len(s.Holders) != 2 {
		t.Fatalf("Get: %+v %v", s, ok)
	}
	h0, h1 := s.Holders[0], s.Holders[1]
	if h0.Key != wk(2, 1) || !slices.Equal(h0.Chain, []messages.ExternalHash{5}) || !h0.Updated.Equal(t0.Add(2*time.Second)) {
		t.Errorf("holder 0: %+v", h0)
	}
	if h1.Key != wk(1, 0) || h1.Depth != 3 || h1.Blocks != 4 || !slices.Equal(h1.Chain, []messages.ExternalHash{1, 2, 4}) {
		t.Errorf("holder 1: %+v", h1)
	}
	if _, ok := x.Get("nope"); ok || x.Holders("nope") != nil {
		t.Error("unknown session found")
	}

	x.DropWorker(2)
	checkInvariants(t, x)
	if hl := summary(x.Holders("s1")); !slices.Equal(hl, []hs{{wk(1, 0), 3, 4, 4}}) {
		t.Errorf("after DropWorker: %v", hl)
	}
	if !x.Forget("s1") || x.Forget("s1") {
		t.Error("Forget: want true then false")
	}
	checkInvariants(t, x)
	// s2's block 1 is still there; s1's are gone from the owners.
	x.Apply(rm(1, 0, 1), t0)
	checkInvariants(t, x)
	if st := x.Stats(); st.Sessions != 0 || st.Blocks != 0 || st.Lineages != 0 {
		t.Errorf("stats after all gone: %+v", st)
	}
}

func TestCheckID(t *testing.T) {
	x := New(Config{MaxIDLen: 8})
	for id, ok := range map[string]bool{
		"a": true, "conv-42:turn/3": false, "12345678": true, "123456789": false, "": false,
		"a b": false, "a\x7f": false, "é": false, "~!@#$%^&": true,
	} {
		if err := x.CheckID(id); (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalidSessionID)) {
			t.Errorf("CheckID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}

func TestExpireNever(t *testing.T) {
	x := New(Config{IdleTTL: -1})
	x.Apply(st(1, 0, "s1", noParent, 1), t0)
	if n := x.Expire(t0.Add(1000 * time.Hour)); n != 0 || x.Stats().Sessions != 1 {
		t.Fatalf("expired %d", n)
	}
	y := New(Config{})
	y.Apply(st(1, 0, "s1", noParent, 1), t0)
	if n := y.Expire(t0.Add(DefaultIdleTTL)); n != 1 {
		t.Fatalf("default TTL: expired %d", n)
	}
}

// TestLongEvent: an event longer than a lineage's position span is
// trimmed while it is applied, and ends in the state a trim at its end
// gives (the newest MaxDepth − MaxDepth/8 blocks, the same counters), also
// when it continues a held block that is not the newest.
func TestLongEvent(t *testing.T) {
	cfg := Config{MaxDepth: 8}
	long := make([]uint64, 60)
	for i := range long {
		long[i] = uint64(100 + i)
	}
	var want []Session
	var wantStats []Stats
	for _, span := range []int{maxSpan, 16, 9} {
		x := New(cfg)
		x.maxSpan = span
		x.Apply(st(1, 0, "s", noParent, 1, 2, 3), t0)
		x.Apply(st(1, 0, "s", 1, 4), t0) // a branch: the newest is 4, under 1
		x.Apply(st(1, 0, "s", 2, long...), t0)
		checkInvariants(t, x)
		got, _ := x.Get("s")
		if span == maxSpan {
			want, wantStats = append(want, got), append(wantStats, x.Stats())
			if h := got.Holders[0]; h.Depth != 7 || h.Blocks != 7 || h.Newest != 159 || h.Chain[0] != 153 {
				t.Fatalf("trimmed at the end: %+v", h)
			}
			continue
		}
		if !slices.EqualFunc(got.Holders, want[0].Holders, func(a, b Holder) bool {
			return a.Key == b.Key && a.Depth == b.Depth && a.Blocks == b.Blocks && a.Newest == b.Newest && slices.Equal(a.Chain, b.Chain)
		}) || x.Stats() != wantStats[0] {
			t.Errorf("span %d: %+v %+v, want %+v %+v", span, got.Holders, x.Stats(), want[0].Holders, wantStats[0])
		}
	}
}

// TestLineageRecord: a lineage record stays in the 112-byte size class, a
// session's in the 64-byte one and a run 16 bytes (doc.go, "Cost": the
// per-lineage records are a third of what a lineage block costs at the ~28
// blocks a conversation's lineage holds).
func TestLineageRecord(t *testing.T) {
	if n := unsafe.Sizeof(lineage{}); n > 112 {
		t.Errorf("lineage record is %d bytes, want at most 112", n)
	}
	if n := unsafe.Sizeof(session{}); n > 64 {
		t.Errorf("session record is %d bytes, want at most 64", n)
	}
	if n := unsafe.Sizeof(run{}); n > 16 {
		t.Errorf("run is %d bytes, want at most 16", n)
	}
}
