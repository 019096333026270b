package normalizer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// stored builds a BlockStored wire event of 2-token blocks.
func stored(hashes []uint64, tokens ...uint32) wire.Event {
	return wire.Event{Tag: wire.TagStored, Type: wire.TypeStored, BlockHashes: hashes, Tokens: tokens, BlockSize: wire.Some[int64](2)}
}

func removed(hashes ...uint64) wire.Event {
	return wire.Event{Tag: wire.TagRemoved, Type: wire.TypeRemoved, BlockHashes: hashes}
}

func with(ev wire.Event, f func(*wire.Event)) wire.Event { f(&ev); return ev }

func group(g int64, kind string) func(*wire.Event) {
	return func(ev *wire.Event) {
		if g >= 0 {
			ev.GroupIdx = wire.Some(g)
		}
		ev.Kind = kind
	}
}

func parent(h uint64) func(*wire.Event) {
	return func(ev *wire.Event) { ev.Parent = wire.Some(h) }
}

func salt(s string) func(*wire.Event) {
	return func(ev *wire.Event) { ev.CacheSalt = s }
}

// run feeds batches (each with an optional dp rank, -1 for none) and returns
// the reasons, in order.
func run(t *testing.T, n *Normalizer, batches ...wire.Batch) []Outcome {
	t.Helper()
	var out []Outcome
	for i := range batches {
		out = n.Batch(&batches[i], out)
	}
	return out
}

func reasons(out []Outcome) []messages.Reason {
	rs := make([]messages.Reason, len(out))
	for i, o := range out {
		rs[i] = o.Reason
	}
	return rs
}

func batch(rank int64, evs ...wire.Event) wire.Batch {
	b := wire.Batch{Events: evs}
	if rank >= 0 {
		b.DpRank = wire.Some(rank)
	}
	return b
}

func TestGroupFilter(t *testing.T) {
	const (
		ok      = messages.ReasonNone
		nonKind = messages.ReasonNonMainAttentionKind
		nonGrp  = messages.ReasonNonMainAttentionGroup
		unlearn = messages.ReasonUnlearnedGroupIdx
		unkKind = messages.ReasonUnknownKind
	)
	cases := []struct {
		name    string
		batches []wire.Batch
		want    []messages.Reason
	}{
		{"no group, no kind: indexed", []wire.Batch{batch(0, stored([]uint64{1}, 1, 2))}, []messages.Reason{ok}},
		{"group 0 unlearned: main", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(0, "")), with(removed(1), group(0, "")))}, []messages.Reason{ok, ok}},
		{"group 1 unlearned: rejected", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(1, "")), with(removed(1), group(1, "")))}, []messages.Reason{unlearn, unlearn}},
		{"main kind with non-zero group", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(3, "full_attention")), with(removed(1), group(3, "")))}, []messages.Reason{ok, ok}},
		{"mla and sink kinds are main", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(-1, "mla_attention")), with(stored([]uint64{2}, 1, 2), group(-1, "sink_full_attention")))}, []messages.Reason{ok, ok}},
		{"non-main kind with group 0 teaches group 0", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(0, "mamba")), with(removed(1), group(0, "")))}, []messages.Reason{nonKind, nonGrp}},
		{"sliding window learned for group 1", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(1, "sliding_window")), with(stored([]uint64{2}, 1, 2), group(1, "")))}, []messages.Reason{nonKind, nonGrp}},
		{"unknown kind string rejected", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(0, "quantum_attention")), with(removed(1), group(5, "")))}, []messages.Reason{unkKind, unlearn}},
		{"metadata is scoped per dp rank", []wire.Batch{
			batch(0, with(stored([]uint64{1}, 1, 2), group(3, "full_attention"))),
			batch(0, with(removed(1), group(3, ""))),
			batch(1, with(removed(1), group(3, ""))),
		}, []messages.Reason{ok, ok, unlearn}},
		{"not learned from removes", []wire.Batch{batch(0, with(removed(1), group(3, "full_attention")), with(removed(1), group(3, "")))}, []messages.Reason{ok, unlearn}},
		{"no learning from an unknown kind", []wire.Batch{batch(0, with(stored([]uint64{1}, 1, 2), group(2, "new_kind")), with(removed(1), group(2, "")))}, []messages.Reason{unkKind, unlearn}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := reasons(run(t, New(Config{Worker: 7}), c.batches...))
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("event %d: %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}

func TestPlacementAndRejections(t *testing.T) {
	cases := []struct {
		name string
		ev   wire.Event
		cfg  Config
		want messages.Reason
		tier messages.StorageTier
	}{
		{"gpu medium", with(stored([]uint64{1}, 1, 2), func(e *wire.Event) { e.Medium = "GPU" }), Config{}, messages.ReasonNone, messages.TierDevice},
		{"cpu pinned", with(stored([]uint64{1}, 1, 2), func(e *wire.Event) { e.Medium = "CPU_PINNED" }), Config{}, messages.ReasonNone, messages.TierHost},
		{"disk lower-case", with(stored([]uint64{1}, 1, 2), func(e *wire.Event) { e.Medium = "disk" }), Config{}, messages.ReasonNone, messages.TierDisk},
		{"object store", with(removed(1), func(e *wire.Event) { e.Medium = "OBJ" }), Config{}, messages.ReasonNone, messages.TierExternal},
		{"unknown medium", with(stored([]uint64{1}, 1, 2), func(e *wire.Event) { e.Medium = "TAPE" }), Config{}, messages.ReasonUnknownMedium, 0},
		{"local locality", with(stored([]uint64{1}, 1, 2), func(e *wire.Event) { e.Locality = "LOCAL" }), Config{}, messages.ReasonNone, 0},
		{"remote locality", with(removed(1), func(e *wire.Event) { e.Locality = "REMOTE" }), Config{}, messages.ReasonRemoteLocality, 0},
		{"mixed-case locality fails closed", with(stored([]uint64{1}, 1, 2), func(e *wire.Event) { e.Locality = "Local" }), Config{}, messages.ReasonUnknownLocality, 0},
		{"device store without tokens", with(stored([]uint64{1}), func(e *wire.Event) { e.BlockSize = wire.Some[int64](0) }), Config{}, messages.ReasonNoTokens, 0},
		{"cpu offload without tokens is a placeholder", with(stored([]uint64{1}), func(e *wire.Event) { e.Medium = "CPU"; e.BlockSize = wire.Some[int64](0) }), Config{}, messages.ReasonNone, messages.TierHost},
		{"partial block only", stored([]uint64{1}, 1), Config{}, messages.ReasonNoTokens, 0},
		{"block size mismatch", stored([]uint64{1}, 1, 2), Config{BlockSize: 16}, messages.ReasonBlockSizeMismatch, 0},
		{"configured block size matches", stored([]uint64{1}, 1, 2), Config{BlockSize: 2}, messages.ReasonNone, 0},
		{"repeated hash in event", stored([]uint64{1, 2, 1}, 1, 2, 3, 4, 5, 6), Config{}, messages.ReasonSelfReferencingChain, 0},
		{"block equals its parent", with(stored([]uint64{4}, 1, 2), parent(4)), Config{}, messages.ReasonSelfReferencingChain, 0},
		{"decode reason passes through", wire.Event{Reason: messages.ReasonUnknownTag, Detail: "x"}, Config{}, messages.ReasonUnknownTag, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := run(t, New(c.cfg), batch(0, c.ev))
			if out[0].Reason != c.want {
				t.Fatalf("reason %q (%s), want %q", out[0].Reason, out[0].Detail, c.want)
			}
			if c.want == messages.ReasonNone && out[0].Event.Placement.Tier != c.tier {
				t.Errorf("tier %v, want %v", out[0].Event.Placement.Tier, c.tier)
			}
			if c.want != messages.ReasonNone && out[0].Detail == "" {
				t.Error("a rejection must say why")
			}
		})
	}
}

func TestSelfReferenceLargeEvent(t *testing.T) {
	hashes := make([]uint64, 200)
	tokens := make([]uint32, 400)
	for i := range hashes {
		hashes[i] = uint64(i + 1)
	}
	out := run(t, New(Config{}), batch(0, stored(hashes, tokens...)))
	if !out[0].Accepted() || len(out[0].Event.Event.Blocks) != 200 {
		t.Fatalf("distinct 200-block chain: %v %s", out[0].Reason, out[0].Detail)
	}
	hashes[150] = 3
	out = run(t, New(Config{}), batch(0, stored(hashes, tokens...)))
	if out[0].Reason != messages.ReasonSelfReferencingChain {
		t.Fatalf("repeat at 150: %v", out[0].Reason)
	}
}

func TestStoredConversion(t *testing.T) {
	n := New(Config{Worker: 9, DpRank: 4})
	ev := with(stored([]uint64{11, 12, 13}, 1, 2, 3, 4, 5), func(e *wire.Event) {
		e.Parent = wire.Some[uint64](10)
		e.SessionID = "s-1"
	})
	out := run(t, n, batch(-1, ev))
	o := out[0]
	if !o.Accepted() {
		t.Fatalf("rejected: %v %s", o.Reason, o.Detail)
	}
	var h blockhash.Hasher
	local := h.Hash(nil, []uint32{1, 2, 3, 4, 5}, 2, blockhash.Options{})
	want := []messages.StoredBlock{{BlockHash: 11, TokensHash: messages.LocalHash(local[0])}, {BlockHash: 12, TokensHash: messages.LocalHash(local[1])}}
	got := o.Event.Event
	if got.Kind != messages.KindStored || !got.HasParent || got.ParentHash != 10 || len(got.Blocks) != 2 ||
		got.Blocks[0] != want[0] || got.Blocks[1] != want[1] {
		t.Fatalf("got %+v, want blocks %+v under parent 10 (only complete blocks)", got, want)
	}
	if o.Event.Placement.Worker != (messages.WorkerKey{Worker: 9, DpRank: 4}) || got.DpRank != 4 || o.Event.SessionID != "s-1" {
		t.Errorf("placement %+v dp %d session %q", o.Event.Placement, got.DpRank, o.Event.SessionID)
	}
	if got.EventID != 0 {
		t.Error("event ids are the coalescer's to assign")
	}
	st := n.Stats()
	if st.Accepted[messages.KindStored] != 1 || st.Blocks != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestOffloadPlaceholderConversion(t *testing.T) {
	ev := with(stored([]uint64{7, 8}), func(e *wire.Event) { e.Medium = "CPU"; e.BlockSize = wire.Some[int64](0) })
	out := run(t, New(Config{BlockSize: 16}), batch(1, ev))
	got := out[0].Event.Event
	if !out[0].Accepted() || got.Kind != messages.KindOffloaded || len(got.Offloaded) != 2 || got.Offloaded[1] != 8 ||
		out[0].Event.Placement.Tier != messages.TierHost || got.DpRank != 1 {
		t.Fatalf("got %+v (%v)", out[0].Event, out[0].Reason)
	}
}

func TestRemovedAndClearedConversion(t *testing.T) {
	out := run(t, New(Config{}), batch(2, removed(5, 6), wire.Event{Tag: wire.TagCleared, Type: wire.TypeCleared}))
	r, c := out[0].Event.Event, out[1].Event.Event
	if r.Kind != messages.KindRemoved || len(r.Removed) != 2 || r.Removed[0] != 5 || r.Removed[1] != 6 || r.DpRank != 2 {
		t.Errorf("removed: %+v", r)
	}
	if c.Kind != messages.KindCleared || c.DpRank != 2 || out[1].Event.Placement.Worker.DpRank != 2 {
		t.Errorf("cleared: %+v", out[1].Event)
	}
}

func TestNamespaces(t *testing.T) {
	tokens := []uint32{1, 2}
	defaultHash := func() messages.LocalHash {
		var h blockhash.Hasher
		return messages.LocalHash(h.Hash(nil, tokens, 2, blockhash.Options{})[0])
	}()
	saltedHash := func(lora, s string) messages.LocalHash {
		var h blockhash.Hasher
		return messages.LocalHash(h.Hash(nil, tokens, 2, blockhash.Options{Seed: blockhash.NamespaceSeed(lora, s)})[0])
	}
	t.Run("child inherits the parent's salt", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			with(stored([]uint64{2}, tokens...), parent(1)),
			with(stored([]uint64{3}, tokens...), parent(2)),
		))
		for i, o := range out[1:] {
			if got := o.Event.Event.Blocks[0].TokensHash; got != saltedHash("", "tenant-a") {
				t.Errorf("generation %d hashed in the wrong namespace", i+1)
			}
		}
	})
	t.Run("empty salt is absent and inherits", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			with(stored([]uint64{2}, tokens...), func(e *wire.Event) { e.Parent = wire.Some[uint64](1); e.CacheSalt = "" }),
		))
		if out[1].Event.Event.Blocks[0].TokensHash != saltedHash("", "tenant-a") {
			t.Error("empty salt did not inherit")
		}
	})
	t.Run("ambiguous parent is rejected", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			with(stored([]uint64{1}, 9, 9), salt("tenant-b")),
			with(stored([]uint64{2}, tokens...), parent(1)),
		))
		if out[2].Reason != messages.ReasonAmbiguousCacheNamespace {
			t.Fatalf("got %v", out[2].Reason)
		}
	})
	t.Run("default-namespace store of a salted hash is ambiguous too", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			stored([]uint64{1}, 9, 9),
			with(stored([]uint64{2}, tokens...), parent(1)),
		))
		if out[2].Reason != messages.ReasonAmbiguousCacheNamespace {
			t.Fatalf("got %v", out[2].Reason)
		}
	})
	t.Run("removing the last store forgets the namespace", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			removed(1),
			with(stored([]uint64{2}, tokens...), parent(1)),
			removed(1),
			with(stored([]uint64{3}, tokens...), parent(1)),
		))
		if out[3].Event.Event.Blocks[0].TokensHash != saltedHash("", "tenant-a") {
			t.Error("one of two stores removed: child must still inherit")
		}
		if out[5].Event.Event.Blocks[0].TokensHash != defaultHash {
			t.Error("all stores removed: the parent's namespace must be forgotten")
		}
	})
	t.Run("clear forgets namespaces", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			with(stored([]uint64{1}, 9, 9), salt("tenant-a")),
			wire.Event{Tag: wire.TagCleared, Type: wire.TypeCleared},
			with(stored([]uint64{2}, tokens...), parent(1)),
		))
		if out[2].Event.Event.Blocks[0].TokensHash != defaultHash {
			t.Error("namespace survived a clear")
		}
	})
	t.Run("namespaces are per dp rank", func(t *testing.T) {
		out := run(t, New(Config{}),
			batch(0, with(stored([]uint64{1}, 9, 9), salt("tenant-a"))),
			batch(1, with(stored([]uint64{2}, tokens...), parent(1))),
		)
		if out[1].Event.Event.Blocks[0].TokensHash != defaultHash {
			t.Error("rank 1 inherited rank 0's namespace")
		}
	})
	t.Run("lora and salt namespaces never collide", func(t *testing.T) {
		out := run(t, New(Config{}), batch(0,
			stored([]uint64{1}, tokens...),
			with(stored([]uint64{2}, tokens...), func(e *wire.Event) { e.LoraName = "x" }),
			with(stored([]uint64{3}, tokens...), salt("x")),
		))
		a, b, c := out[0].Event.Event.Blocks[0].TokensHash, out[1].Event.Event.Blocks[0].TokensHash, out[2].Event.Event.Blocks[0].TokensHash
		if a == b || b == c || a == c || b != saltedHash("x", "") || c != saltedHash("", "x") {
			t.Errorf("default %d, lora %d, salt %d", a, b, c)
		}
	})
	t.Run("cap stops remembering, counted", func(t *testing.T) {
		n := New(Config{MaxNamespaceBlocks: 1})
		run(t, n, batch(0, with(stored([]uint64{1, 2}, 1, 2, 3, 4), salt("s"))))
		if n.Stats().NamespaceOverflow != 1 {
			t.Errorf("overflow %d, want 1", n.Stats().NamespaceOverflow)
		}
	})
}

func TestBatchRank(t *testing.T) {
	n := New(Config{DpRank: 3})
	out := run(t, n, batch(-1, removed(1)), batch(5, removed(1)), batch(1<<40, removed(1), removed(2)))
	if out[0].Event.Event.DpRank != 3 || out[1].Event.Event.DpRank != 5 {
		t.Errorf("ranks %d %d", out[0].Event.Event.DpRank, out[1].Event.Event.DpRank)
	}
	if out[2].Reason != messages.ReasonMalformed || out[3].Reason != messages.ReasonMalformed {
		t.Errorf("out-of-range rank: %v %v", out[2].Reason, out[3].Reason)
	}
	if n.Stats().Rejected[messages.ReasonMalformed] != 2 {
		t.Errorf("rejections not counted: %+v", n.Stats().Rejected)
	}
}

func TestBadEventKeepsNeighbours(t *testing.T) {
	out := run(t, New(Config{}), batch(0,
		stored([]uint64{1}, 1, 2),
		wire.Event{Reason: messages.ReasonMalformed, Detail: "broken"},
		with(stored([]uint64{2}, 3, 4), parent(1)),
	))
	if !out[0].Accepted() || out[1].Accepted() || !out[2].Accepted() {
		t.Fatalf("outcomes %v", reasons(out))
	}
}

func TestStateIsBounded(t *testing.T) {
	n := New(Config{MaxDpRanks: 2})
	out := run(t, n, batch(0, removed(1)), batch(1, removed(1)), batch(2, removed(1)), batch(0, removed(1)))
	if got := reasons(out); got[2] != messages.ReasonMalformed || got[3] != messages.ReasonNone {
		t.Fatalf("third rank must be refused, known ranks kept: %v", got)
	}
	var evs []wire.Event
	for g := range int64(maxLearnedGroups + 1) {
		evs = append(evs, with(stored([]uint64{uint64(g + 1)}, 1, 2), group(g+1, "full_attention")))
	}
	evs = append(evs, with(removed(1), group(maxLearnedGroups+1, "")))
	out = run(t, New(Config{}), batch(0, evs...))
	if last := out[len(out)-1]; last.Reason != messages.ReasonUnlearnedGroupIdx {
		t.Fatalf("group past the learning cap: %v", last.Reason)
	}
}

// TestPromptEmbedsAreBlockIdentity checks that a block's prompt-embeds
// digest (vLLM's extra key, raw bytes or typed) is part of its local hash:
// the same placeholder tokens with other embeddings are another block, the
// same embeddings in either form are the same block.
func TestPromptEmbedsAreBlockIdentity(t *testing.T) {
	digest := func(b byte) []byte { d := make([]byte, 32); d[0] = b; return d }
	raw := func(d []byte) func(*wirefix.B) {
		return func(b *wirefix.B) { b.Array(1).Array(1).Bin(d) }
	}
	typed := func(d []byte) func(*wirefix.B) {
		return func(b *wirefix.B) { b.Array(1).Array(1).Map(2).Str("type").Str("prompt_embeds").Str("hash").Bin(d) }
	}
	none := func(b *wirefix.B) { b.Nil() }
	local := func(extra func(*wirefix.B)) messages.LocalHash {
		t.Helper()
		return firstLocal(t, func(b *wirefix.B) { extra(b.Str("extra_keys")) })
	}
	plain, a, b := local(none), local(raw(digest(1))), local(raw(digest(2)))
	if plain == a || a == b || plain == b {
		t.Errorf("local hashes plain %x, embeds A %x, embeds B %x: want all different", plain, a, b)
	}
	if ta := local(typed(digest(1))); ta != a {
		t.Errorf("typed embeds A hashes %x, raw %x: want equal", ta, a)
	}
}

// TestSelfReferenceModel checks selfReference against the plain definition
// (some hash repeats, or equals the parent) on random chains of both sizes
// it handles differently (and past the longest whose set it keeps), with
// and without repeats, one chainCheck for all.
func TestSelfReferenceModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	var c chainCheck
	for i := range 20000 {
		n := rng.IntN(100)
		if i%1000 == 0 {
			n = maxSeenKept + rng.IntN(100)
		}
		space := uint64(1 + rng.IntN(4*n+1))
		if rng.IntN(2) == 0 {
			space = 1 << 62 // repeats all but impossible: the filter's false positives
		}
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = rng.Uint64N(space)
		}
		parent := wire.Opt[uint64]{V: rng.Uint64N(space), Ok: rng.IntN(2) == 0}
		want := false
		for i, h := range hashes {
			want = want || (parent.Ok && h == parent.V) || slices.Contains(hashes[:i], h)
		}
		h, got := c.selfReference(hashes, parent)
		if got != want {
			t.Fatalf("selfReference(%v, %v) = %v, want %v", hashes, parent, got, want)
		}
		seen := 0
		for _, g := range hashes {
			if g == h {
				seen++
			}
		}
		if got && seen < 2 && !(parent.Ok && h == parent.V && seen == 1) {
			t.Fatalf("selfReference(%v, %v) names %d, which does not repeat", hashes, parent, h)
		}
	}
}

// TestSharedScratch feeds two streams' batches, interleaved, to two
// normalizers sharing one Scratch and to two with their own: every
// outcome is the same (an event's local hashes are copied out before the
// other stream's next event reuses the scratch), the shared scratch is the
// one used, and it is back in the Scratch after each Batch.
func TestSharedScratch(t *testing.T) {
	events := func(w uint64) []wire.Batch {
		var bs []wire.Batch
		for i := range uint64(6) {
			toks := make([]uint32, 2*(i+1)+1)
			for j := range toks {
				toks[j] = uint32(w*1000 + i*10 + uint64(j))
			}
			hashes := make([]uint64, i+1)
			for j := range hashes {
				hashes[j] = w<<32 | i<<8 | uint64(j)
			}
			bs = append(bs, batch(-1, stored(hashes, toks...)))
		}
		return bs
	}
	shared := new(Scratch)
	a, b := New(Config{Worker: 1, Scratch: shared}), New(Config{Worker: 2, Scratch: shared})
	ownA, ownB := New(Config{Worker: 1}), New(Config{Worker: 2})
	ea, eb := events(1), events(2)
	var gotA, gotB []Outcome
	for i := range ea {
		gotA = a.Batch(&ea[i], gotA)
		gotB = b.Batch(&eb[i], gotB)
	}
	for _, c := range []struct {
		got  []Outcome
		own  *Normalizer
		evts []wire.Batch
	}{{gotA, ownA, ea}, {gotB, ownB, eb}} {
		want := run(t, c.own, c.evts...)
		if len(c.got) != len(want) {
			t.Fatalf("%d outcomes, want %d", len(c.got), len(want))
		}
		for i := range want {
			if !want[i].Accepted() || !slices.Equal(c.got[i].Event.Event.Blocks, want[i].Event.Event.Blocks) {
				t.Errorf("event %d: blocks %+v with the shared scratch, %+v with its own (%v)", i, c.got[i].Event.Event.Blocks, want[i].Event.Event.Blocks, want[i].Reason)
			}
		}
	}
	if cap(shared.local) < 6 {
		t.Errorf("shared scratch holds room for %d local hashes: the normalizers did not hash into it", cap(shared.local))
	}
	if a.local != nil || b.local != nil {
		t.Errorf("between batches the normalizers keep %d and %d local hashes of room, want none", cap(a.local), cap(b.local))
	}
}
