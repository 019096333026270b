package coalescer_test

// Over 500 lines on purpose: TestRules is the coalescer's one scenario
// table, beside the step parser and printer it is written in.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

var key = messages.WorkerKey{Worker: 7, DpRank: 2}

var tierByName = map[string]messages.StorageTier{
	"dev": messages.TierDevice, "host": messages.TierHost, "disk": messages.TierDisk,
}

// tokens is the local hash the tests give engine hash h, so that outputs can
// be checked to carry each block's own pair.
func tokens(h messages.ExternalHash) messages.LocalHash { return messages.LocalHash(h*10 + 1) }

// parse reads one input of the table tests:
//
//	S[@tier] session [pN] h…   Stored (session "-" is ""; pN = parent N)
//	R[@tier] session h…        Removed
//	C session                  Cleared
//	w=N …                      the same, for worker N (another stream)
//	F                          Flush (parse returns flush = true)
func parse(t *testing.T, s string) (ev messages.PlacementEvent, flush bool) {
	t.Helper()
	f := strings.Fields(s)
	ev.Placement.Worker = key
	ev.Event.DpRank = key.DpRank
	if strings.HasPrefix(f[0], "w=") {
		w, err := strconv.ParseUint(f[0][2:], 10, 64)
		if err != nil {
			t.Fatalf("input %q: %v", s, err)
		}
		ev.Placement.Worker.Worker = messages.WorkerID(w)
		f = f[1:]
	}
	if f[0] == "F" {
		return ev, true
	}
	kind, tier, _ := strings.Cut(f[0], "@")
	if tier != "" {
		tt, ok := tierByName[tier]
		if !ok {
			t.Fatalf("input %q: unknown tier", s)
		}
		ev.Placement.Tier = tt
	}
	if len(f) < 2 {
		t.Fatalf("input %q: no session", s)
	}
	if f[1] != "-" {
		ev.SessionID = f[1]
	}
	f = f[2:]
	switch kind {
	case "S":
		ev.Event.Kind = messages.KindStored
		ev.Event.Blocks = []messages.StoredBlock{} // empty, not nil: "S a" is an empty store
	case "R":
		ev.Event.Kind = messages.KindRemoved
	case "C":
		ev.Event.Kind = messages.KindCleared
	case "?":
		ev.Event.Kind = 9
	default:
		t.Fatalf("input %q: unknown kind", s)
	}
	for _, w := range f {
		if p, ok := strings.CutPrefix(w, "p"); ok {
			n, err := strconv.ParseUint(p, 10, 64)
			if err != nil {
				t.Fatalf("input %q: %v", s, err)
			}
			ev.Event.HasParent, ev.Event.ParentHash = true, messages.ExternalHash(n)
			continue
		}
		n, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			t.Fatalf("input %q: %v", s, err)
		}
		h := messages.ExternalHash(n)
		if kind == "S" {
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: h, TokensHash: tokens(h)})
		} else {
			ev.Event.Removed = append(ev.Event.Removed, h)
		}
	}
	return ev, false
}

// format writes an emitted event as "id kind[@tier] session [parent] [hashes]",
// flagging anything that is not the stream's or the block's own.
func format(ev messages.RouterEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d ", ev.Event.EventID)
	switch ev.Event.Kind {
	case messages.KindStored:
		b.WriteString("S")
	case messages.KindRemoved:
		b.WriteString("R")
	case messages.KindCleared:
		b.WriteString("C")
	default:
		fmt.Fprintf(&b, "kind%d", ev.Event.Kind)
	}
	for name, t := range tierByName {
		if t == ev.StorageTier && t != messages.TierDevice {
			b.WriteString("@" + name)
		}
	}
	if ev.SessionID == "" {
		b.WriteString(" -")
	} else {
		b.WriteString(" " + ev.SessionID)
	}
	if ev.Event.Kind == messages.KindStored {
		if ev.Event.HasParent {
			fmt.Fprintf(&b, " p%d", ev.Event.ParentHash)
		} else {
			b.WriteString(" -")
		}
	}
	if ev.Event.Kind != messages.KindCleared {
		b.WriteString(" [")
		for i, blk := range ev.Event.Blocks {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d", blk.BlockHash)
			if blk.TokensHash != tokens(blk.BlockHash) {
				b.WriteString("!tok")
			}
		}
		for i, h := range ev.Event.Removed {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d", h)
		}
		b.WriteString("]")
	}
	if (ev.Event.Kind == messages.KindStored) != (len(ev.Event.Blocks) > 0) ||
		(ev.Event.Kind == messages.KindRemoved) != (len(ev.Event.Removed) > 0) ||
		(!ev.Event.HasParent && ev.Event.ParentHash != 0) {
		b.WriteString(" !data")
	}
	if ev.WorkerID != key.Worker || ev.Event.DpRank != key.DpRank {
		b.WriteString(" !key")
	}
	return b.String()
}

// runSteps feeds s the table-test steps, each an input (see parse), "=>", and
// the events it must emit at once (see format), separated by ";".
func runSteps(t *testing.T, s *coalescer.Stream, steps []string) {
	t.Helper()
	var out []messages.RouterEvent
	for i, st := range steps {
		in, wantS, ok := strings.Cut(st, "=>")
		if !ok {
			t.Fatalf("step %d %q: no =>", i, st)
		}
		var want []string
		for w := range strings.SplitSeq(wantS, ";") {
			if w = strings.TrimSpace(w); w != "" {
				want = append(want, w)
			}
		}
		ev, flush := parse(t, in)
		if flush {
			out = s.Flush(out[:0])
		} else {
			out = s.Push(ev, out[:0])
		}
		got := make([]string, len(out))
		for j := range out {
			got[j] = format(out[j])
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("step %d %q:\n got  %q\n want %q", i, strings.TrimSpace(in), got, want)
		}
	}
}

func TestRules(t *testing.T) {
	cases := []struct {
		name  string
		cfg   coalescer.Config
		steps []string
	}{
		{"chain continuation merges", coalescer.Config{}, []string{
			"S a 1 2 =>",
			"S a p2 3 =>",
			"S a p3 4 5 =>",
			"F => 1 S a - [1 2 3 4 5]",
			"F =>",
		}},
		{"parent kept on the merged event", coalescer.Config{}, []string{
			"S a p9 1 =>",
			"S a p1 2 =>",
			"F => 1 S a p9 [1 2]",
		}},
		{"not a continuation: flush first", coalescer.Config{}, []string{
			"S a 1 2 =>",
			"S a p1 5 => 1 S a - [1 2]",
			"S a 6 => 2 S a p1 [5]",
			"F => 3 S a - [6]",
		}},
		{"session change flushes first", coalescer.Config{}, []string{
			"S a 1 =>",
			"S b p1 2 => 1 S a - [1]",
			"R a 1 => 2 S b p1 [2]",
			"F => 3 R a [1]",
		}},
		{"unattributed events merge with each other only", coalescer.Config{}, []string{
			"S - 1 =>",
			"S - p1 2 =>",
			"S a p2 3 => 1 S - - [1 2]",
			"S - p3 4 => 2 S a p2 [3]",
			"F => 3 S - p3 [4]",
		}},
		{"tier change flushes", coalescer.Config{}, []string{
			"S a 1 =>",
			"S@host a p1 2 => 1 S a - [1]",
			"R@host a 7 => 2 S@host a p1 [2]",
			"R a 8 => 3 R@host a [7]",
			"F => 4 R a [8]",
		}},
		{"removes merge", coalescer.Config{}, []string{
			"R a 1 2 =>",
			"R a 3 =>",
			"F => 1 R a [1 2 3]",
		}},
		{"stored and removed never merge", coalescer.Config{}, []string{
			"S a 1 2 =>",
			"R a 1 => 1 S a - [1 2]",
			"S a p2 3 => 2 R a [1]",
			"F => 3 S a p2 [3]",
		}},
		{"cleared is a barrier and alone", coalescer.Config{}, []string{
			"S a 1 =>",
			"C a => 1 S a - [1]; 2 C a",
			"C b => 3 C b",
			"S a p1 2 =>",
			"F => 4 S a p1 [2]",
		}},
		{"flush at the cap", coalescer.Config{MaxBlocks: 4}, []string{
			"S a 1 2 =>",
			"S a p2 3 4 => 1 S a - [1 2 3 4]",
			"S a p4 5 =>",
			"F => 2 S a p4 [5]",
		}},
		{"a merge over the cap flushes first", coalescer.Config{MaxBlocks: 4}, []string{
			"S a 1 2 3 =>",
			"S a p3 4 5 => 1 S a - [1 2 3]",
			"R a 9 8 7 6 => 2 S a p3 [4 5]; 3 R a [9 8 7 6]",
			"R a 5 4 3 =>",
			"R a 2 1 => 4 R a [5 4 3]",
			"F => 5 R a [2 1]",
		}},
		{"over-cap store is split after flushing, rest pending", coalescer.Config{MaxBlocks: 3}, []string{
			"S a 1 =>",
			"S a p1 2 3 4 5 6 7 8 => 1 S a - [1]; 2 S a p1 [2 3 4]; 3 S a p4 [5 6 7]",
			"S a p8 9 =>",
			"F => 4 S a p7 [8 9]",
		}},
		{"over-cap exact multiple leaves nothing pending", coalescer.Config{MaxBlocks: 2}, []string{
			"S a 1 2 3 4 => 1 S a - [1 2]; 2 S a p2 [3 4]",
			"F =>",
			"R a 1 2 3 4 5 => 3 R a [1 2]; 4 R a [3 4]",
			"F => 5 R a [5]",
		}},
		{"duplicate stores are reference counted", coalescer.Config{}, []string{
			"S a 1 =>",
			"S b 1 => 1 S a - [1]",
			"R - 1 =>", // count 2 → 1: dropped, no id, b still pending
			"S b p1 2 =>",
			"R - 1 => 2 S b - [1 2]",
			"F => 3 R - [1]",
		}},
		{"still-referenced hashes leave the remove", coalescer.Config{}, []string{
			"S a 1 2 3 =>",
			"S a 2 => 1 S a - [1 2 3]",
			"R a 1 2 3 => 2 S a - [2]",
			"F => 3 R a [1 3]",
			"R a 2 =>",
			"F => 4 R a [2]",
		}},
		{"a remove of an unknown hash passes", coalescer.Config{}, []string{
			"R a 42 =>",
			"R a 42 =>",
			"F => 1 R a [42 42]",
		}},
		{"cleared resets reference counts", coalescer.Config{}, []string{
			"S a 1 =>",
			"S a 1 => 1 S a - [1]",
			"C - => 2 S a - [1]; 3 C -",
			"S a 1 =>",
			"R a 1 => 4 S a - [1]",
			"F => 5 R a [1]",
		}},
		{"reference counts are per tier", coalescer.Config{}, []string{
			"S a 1 =>",
			"S@host a 1 => 1 S a - [1]",
			"R a 1 => 2 S@host a - [1]",
			"F => 3 R a [1]",
		}},
		{"inputs that emit nothing are invisible", coalescer.Config{}, []string{
			"S a 1 =>",
			"S b =>",          // empty store
			"R b =>",          // empty remove
			"w=9 S b p1 2 =>", // another stream
			"? b 3 =>",        // unknown kind
			"S a p1 2 =>",
			"F => 1 S a - [1 2]",
		}},
		{"removes from within a pending store", coalescer.Config{}, []string{
			"S a 1 2 =>",
			"R a 2 => 1 S a - [1 2]",
			"S a p1 2 => 2 R a [2]",
			"F => 3 S a p1 [2]",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runSteps(t, coalescer.New(key, c.cfg), c.steps)
		})
	}
}

func TestDefaultCap(t *testing.T) {
	s := coalescer.New(key, coalescer.Config{})
	ev := messages.PlacementEvent{Placement: messages.Placement{Worker: key}, Event: messages.KvCacheEvent{Kind: messages.KindStored}}
	for i := range 300 {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: messages.ExternalHash(i + 1)})
	}
	out := s.Push(ev, nil)
	if len(out) != 2 || len(out[0].Event.Blocks) != 128 || len(out[1].Event.Blocks) != 128 || !s.Pending() {
		t.Fatalf("300 blocks: %d events, pending %v", len(out), s.Pending())
	}
	if out[1].Event.ParentHash != 128 || !out[1].Event.HasParent {
		t.Fatalf("second piece parent %d (%v), want 128", out[1].Event.ParentHash, out[1].Event.HasParent)
	}
	out = s.Flush(out[:0])
	if len(out) != 1 || len(out[0].Event.Blocks) != 44 || out[0].Event.ParentHash != 256 || out[0].Event.EventID != 3 {
		t.Fatalf("rest: %+v", out)
	}
	if st := s.Stats(); st.Split != 1 || st.CapFlushes != 0 || st.OwnerFlushes != 1 || st.Emitted[messages.KindStored] != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestNoAliasing checks that Push keeps no reference to its input's slices
// and that emitted events never share memory with later pending data.
func TestNoAliasing(t *testing.T) {
	s := coalescer.New(key, coalescer.Config{MaxBlocks: 8})
	in := func(parent messages.ExternalHash, hs ...messages.ExternalHash) messages.PlacementEvent {
		ev := messages.PlacementEvent{Placement: messages.Placement{Worker: key}, SessionID: "a",
			Event: messages.KvCacheEvent{Kind: messages.KindStored, HasParent: parent != 0, ParentHash: parent}}
		for _, h := range hs {
			ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: h, TokensHash: tokens(h)})
		}
		return ev
	}
	var kept []messages.RouterEvent
	var snap []string
	for round := range 20 {
		base := messages.ExternalHash(round * 100)
		evs := []messages.PlacementEvent{in(0, base+1, base+2), in(base+2, base+3), in(base+3, base+4, base+5, base+6)}
		for _, ev := range evs {
			n := len(kept)
			kept = s.Push(ev, kept)
			for i := range ev.Event.Blocks { // the caller reuses its buffer
				ev.Event.Blocks[i] = messages.StoredBlock{BlockHash: 999999, TokensHash: 1}
			}
			for _, e := range kept[n:] {
				snap = append(snap, format(e))
			}
		}
		n := len(kept)
		kept = s.Flush(kept)
		for _, e := range kept[n:] {
			snap = append(snap, format(e))
		}
	}
	if len(kept) != 20 {
		t.Fatalf("%d events, want 20", len(kept))
	}
	for i, e := range kept {
		if got := format(e); got != snap[i] {
			t.Fatalf("event %d changed after emission: %q, was %q", i, got, snap[i])
		}
		if want := fmt.Sprintf("%d S a - [%d %d %d %d %d %d]", i+1, i*100+1, i*100+2, i*100+3, i*100+4, i*100+5, i*100+6); snap[i] != want {
			t.Fatalf("event %d = %q, want %q", i, snap[i], want)
		}
	}
}

func TestTrackedCap(t *testing.T) {
	s := coalescer.New(key, coalescer.Config{MaxTrackedBlocks: 2})
	runSteps(t, s, []string{
		"S a 1 2 3 =>", // 3 is not counted: the table is full
		"S a 3 2 => 1 S a - [1 2 3]",
		"R a 3 2 => 2 S a - [3 2]", // 3 passes (untracked), 2 is still held once
		"F => 3 R a [3]",
		"R a 1 2 =>",
		"F => 4 R a [1 2]",
	})
	if st := s.Stats(); st.Untracked != 2 || st.FilteredHashes != 1 || s.Tracked() != 0 {
		t.Fatalf("stats %+v, tracked %d", st, s.Tracked())
	}
}

func TestStats(t *testing.T) {
	s := coalescer.New(key, coalescer.Config{MaxBlocks: 3})
	runSteps(t, s, []string{
		"S a 1 =>",
		"S a p1 2 =>",
		"S b p2 3 => 1 S a - [1 2]",
		"S b 1 => 2 S b p2 [3]",
		"R b 1 =>",
		"R b 9 8 7 6 => 3 S b - [1]; 4 R b [9 8 7]",
		"w=1 C - =>",
		"C - => 5 R b [6]; 6 C -",
		"F =>",
		"S c 4 =>",
		"F => 7 S c - [4]",
	})
	want := coalescer.Stats{
		Pushed: 9, Emitted: [messages.KindCount]uint64{0, 4, 2, 1, 0}, Merged: 1,
		SessionFlushes: 1, OwnerFlushes: 1, Split: 1,
		FilteredHashes: 1, DroppedRemoves: 1, Invalid: 1,
	}
	if st := s.Stats(); st != want {
		t.Fatalf("stats\n got  %+v\n want %+v", st, want)
	}
	if s.LastEventID() != 7 || s.Key() != key {
		t.Fatalf("last id %d, key %v", s.LastEventID(), s.Key())
	}
}

func TestUncountedStoresLetRemovesThrough(t *testing.T) {
	s := coalescer.New(key, coalescer.Config{})
	ev := func(kind messages.EventKind, tier messages.StorageTier) messages.PlacementEvent {
		e := messages.PlacementEvent{Placement: messages.Placement{Worker: key, Tier: tier}, Event: messages.KvCacheEvent{Kind: kind}}
		if kind == messages.KindStored {
			e.Event.Blocks = []messages.StoredBlock{{BlockHash: 5}}
		} else {
			e.Event.Removed = []messages.ExternalHash{5}
		}
		return e
	}
	removes := func(tier messages.StorageTier, n int) (passed int) {
		for range n {
			out := s.Flush(s.Push(ev(messages.KindRemoved, tier), nil))
			for _, o := range out {
				if o.Event.Kind == messages.KindRemoved {
					passed++
				}
			}
		}
		return passed
	}
	// A tier the table has no count for: every remove passes.
	const unknownTier = messages.StorageTier(9)
	s.Push(ev(messages.KindStored, unknownTier), nil)
	s.Push(ev(messages.KindStored, unknownTier), nil)
	if got := removes(unknownTier, 1); got != 1 {
		t.Fatalf("unknown tier: %d removes passed, want 1", got)
	}
	// A saturated count: the stores past 0xffff are not counted.
	for range 0xffff + 2 {
		s.Push(ev(messages.KindStored, messages.TierHost), nil)
	}
	if got := removes(messages.TierHost, 0xffff-1); got != 0 {
		t.Fatalf("saturated count: %d of 0xfffe removes passed, want 0", got)
	}
	if got := removes(messages.TierHost, 1); got != 1 {
		t.Fatalf("last counted store: %d removes passed, want 1", got)
	}
	if st := s.Stats(); st.Untracked != 2+2 || s.Tracked() != 0 {
		t.Fatalf("untracked %d (want 4), tracked %d (want 0)", st.Untracked, s.Tracked())
	}
}

func TestUnknownParents(t *testing.T) {
	s := coalescer.New(key, coalescer.Config{})
	runSteps(t, s, []string{
		"S a 1 =>",
		"S a p1 2 =>",
		"S a p9 3 => 1 S a - [1 2]",
		"F => 2 S a p9 [3]",
		"C - => 3 C -",
		"S a p1 4 =>",
	})
	if got := s.Stats().UnknownParents; got != 2 {
		t.Fatalf("UnknownParents = %d, want 2 (parent 9 never stored; parent 1 gone with the clear)", got)
	}
}
