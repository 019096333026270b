package normalizer

import (
	"fmt"
	"math"

	"github.com/kvrouter/kvrouter/actors/internal/hashtab"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
	"github.com/kvrouter/kvrouter/messages/wire"
)

// Config is one worker's normalization settings.
type Config struct {
	// Worker is the engine instance whose batches this normalizer sees.
	Worker messages.WorkerID
	// DpRank is used for batches that carry no rank.
	DpRank messages.DpRank
	// BlockSize is the expected tokens per block. Stored events declaring
	// another size are rejected (block_size_mismatch); 0 trusts each
	// event's own block_size.
	BlockSize int
	// MaxNamespaceBlocks caps, per dp rank, how many engine hashes of
	// namespaced (salted) blocks are remembered for inheritance; 0 means
	// 1<<20. Past the cap new blocks are not remembered (counted in
	// Stats.NamespaceOverflow) and their children fall back to the default
	// namespace, which can only cost cache hits, never report a block the
	// engine does not hold.
	MaxNamespaceBlocks int
	// MaxDpRanks caps how many distinct dp ranks one worker may report
	// (each keeps state); events of further ranks are rejected as
	// malformed. 0 means 256.
	MaxDpRanks int
	// Scratch, when set, lends the normalizer its buffer of local hashes
	// for each Batch, shared with the other normalizers fed by the same
	// goroutine; nil: the normalizer keeps a buffer of its own.
	Scratch *Scratch
}

// Scratch is the buffer a Normalizer needs only while it hashes a stored
// event: the event's local hashes, copied into its blocks at once. The
// normalizers of many streams fed by one goroutine share one (the pool
// actor's), lent to each for one Batch, so a stream between batches keeps
// none: the local hashes of a stream's longest prompt (8 bytes a block)
// would otherwise stay with each stream. It is not safe for concurrent
// use.
type Scratch struct {
	local []uint64
}

// maxLearnedGroups caps the group kinds learned per dp rank (real models
// have a handful of KV-cache groups); further groups stay unlearned.
const maxLearnedGroups = 64

// Outcome is the result for one wire event, in batch order: an accepted
// PlacementEvent, or the Reason it was rejected for.
type Outcome struct {
	Event  messages.PlacementEvent
	Reason messages.Reason
	Detail string
}

// Accepted reports whether the event produced a PlacementEvent.
func (o Outcome) Accepted() bool { return o.Reason == messages.ReasonNone }

// Stats counts what a Normalizer has seen since it was created.
type Stats struct {
	Accepted          [messages.KindCount]uint64 // by messages.EventKind
	Rejected          [messages.ReasonCount]uint64
	Blocks            uint64 // stored blocks accepted
	NamespaceOverflow uint64 // namespaced blocks not remembered (cap reached)
	// DroppedHints counts, by wire.Hint, the unusable optional values left
	// out of events that were kept (a session id over the cap: the blocks
	// are indexed, unattributed) and of batches (an unusable ts).
	DroppedHints [wire.HintCount]uint64
}

// Normalizer holds one worker's state: the group kinds learned per
// (dp_rank, group_idx) and the cache namespace of each salted engine hash
// per dp rank. It is not safe for concurrent use.
type Normalizer struct {
	cfg    Config
	ranks  map[messages.DpRank]*rankState
	hasher blockhash.Hasher
	local  []uint64 // the local hashes of the event being hashed (Scratch's while lent)
	chains chainCheck
	seeds  map[nsName]blockhash.Seed
	stats  Stats
}

// rankState is what one (worker, dp_rank) stream taught the normalizer.
type rankState struct {
	groups map[int64]kindClass
	ns     map[uint64]nsEntry
}

// nsEntry is the cache namespace (salt) an engine hash was stored under,
// and how many stores of it are live. ambiguous marks a hash stored under two
// namespaces: children that would inherit from it are rejected.
type nsEntry struct {
	salt      string
	ambiguous bool
	refs      uint32
}

type nsName struct{ lora, salt string }

// New returns a Normalizer for one worker.
func New(cfg Config) *Normalizer {
	if cfg.MaxNamespaceBlocks <= 0 {
		cfg.MaxNamespaceBlocks = 1 << 20
	}
	if cfg.MaxDpRanks <= 0 {
		cfg.MaxDpRanks = 256
	}
	return &Normalizer{
		cfg:   cfg,
		ranks: make(map[messages.DpRank]*rankState),
		seeds: make(map[nsName]blockhash.Seed),
	}
}

// Stats returns the counters so far.
func (n *Normalizer) Stats() Stats { return n.stats }

// Batch normalizes every event of b, appending one Outcome per event (in
// order) to out. Truncated or lost events are not in b.Events beyond the one
// that carries ReasonTruncated; callers count b.Lost themselves.
func (n *Normalizer) Batch(b *wire.Batch, out []Outcome) []Outcome {
	rank, rankErr := n.cfg.DpRank, ""
	if b.DpRank.Ok {
		if b.DpRank.V > math.MaxUint32 {
			rankErr = fmt.Sprintf("batch dp rank %d is out of range", b.DpRank.V)
		}
		rank = messages.DpRank(b.DpRank.V)
	}
	rs := n.rank(rank)
	if rs == nil && rankErr == "" {
		rankErr = fmt.Sprintf("dp rank %d would exceed the cap of %d ranks per worker", rank, n.cfg.MaxDpRanks)
	}
	n.countHints(b.Dropped)
	sc := n.cfg.Scratch
	if sc != nil {
		n.local = sc.local
	}
	for i := range b.Events {
		n.countHints(b.Events[i].Dropped)
		var o Outcome
		if rankErr != "" {
			o.Reason, o.Detail = messages.ReasonMalformed, rankErr
		} else {
			o = n.event(rs, rank, &b.Events[i])
		}
		if o.Accepted() {
			n.stats.Accepted[o.Event.Event.Kind]++
			n.stats.Blocks += uint64(len(o.Event.Event.Blocks))
		} else {
			n.stats.Rejected[o.Reason]++
		}
		out = append(out, o)
	}
	if sc != nil {
		sc.local, n.local = n.local, nil
	}
	return out
}

// countHints counts each dropped hint of a set.
func (n *Normalizer) countHints(s wire.Hints) {
	for h := wire.Hint(0); s != 0 && h < wire.HintCount; h++ {
		if s.Has(h) {
			n.stats.DroppedHints[h]++
		}
	}
}

// rank returns the state of dp rank r, creating it unless the worker already
// has MaxDpRanks ranks (then nil).
func (n *Normalizer) rank(r messages.DpRank) *rankState {
	rs, ok := n.ranks[r]
	if !ok {
		if len(n.ranks) >= n.cfg.MaxDpRanks {
			return nil
		}
		rs = &rankState{groups: make(map[int64]kindClass), ns: make(map[uint64]nsEntry)}
		n.ranks[r] = rs
	}
	return rs
}

func reject(r messages.Reason, detail string) Outcome {
	return Outcome{Reason: r, Detail: detail}
}

// event normalizes one wire event.
func (n *Normalizer) event(rs *rankState, rank messages.DpRank, ev *wire.Event) Outcome {
	if ev.Reason != messages.ReasonNone {
		return reject(ev.Reason, ev.Detail)
	}
	p := messages.PlacementEvent{
		Placement: messages.Placement{Worker: messages.WorkerKey{Worker: n.cfg.Worker, DpRank: rank}},
		Event:     messages.KvCacheEvent{DpRank: rank},
	}
	if ev.Type == wire.TypeCleared {
		p.Event.Kind = messages.KindCleared
		rs.ns = make(map[uint64]nsEntry)
		return Outcome{Event: p}
	}
	if r := rs.groupFilter(ev); r != messages.ReasonNone {
		return reject(r, fmt.Sprintf("kv_cache_spec_kind %q, group_idx %v", ev.Kind, optString(ev.GroupIdx)))
	}
	if r := localityReason(ev.Locality); r != messages.ReasonNone {
		return reject(r, fmt.Sprintf("locality %q", ev.Locality))
	}
	tier, ok := placementTier(ev.Medium)
	if !ok {
		return reject(messages.ReasonUnknownMedium, fmt.Sprintf("medium %q", ev.Medium))
	}
	p.Placement.Tier = tier
	if ev.Type == wire.TypeRemoved {
		p.Event.Kind = messages.KindRemoved
		p.Event.Removed = make([]messages.ExternalHash, 0, len(ev.BlockHashes))
		for i, h := range ev.BlockHashes {
			if ev.RemainingCopies != nil && ev.RemainingCopies[i] > 0 {
				continue // the engine still holds a copy under this hash (messages/wire, copies.go)
			}
			p.Event.Removed = append(p.Event.Removed, messages.ExternalHash(h))
			rs.forget(h)
		}
		return Outcome{Event: p}
	}
	return n.stored(rs, ev, p)
}

// stored converts a BlockStored event: checks block size and chain sanity,
// resolves the namespace, and hashes each complete block.
func (n *Normalizer) stored(rs *rankState, ev *wire.Event, p messages.PlacementEvent) Outcome {
	bs := int(ev.BlockSize.V)
	if len(ev.Tokens) == 0 && len(ev.BlockHashes) > 0 && p.Placement.Tier != messages.TierDevice {
		// An offload placeholder (vLLM's CPU-offload stores carry no
		// tokens): the index resolves it by engine hash.
		p.Event.Kind = messages.KindOffloaded
		p.Event.Offloaded = make([]messages.ExternalHash, len(ev.BlockHashes))
		for i, h := range ev.BlockHashes {
			p.Event.Offloaded[i] = messages.ExternalHash(h)
		}
		return Outcome{Event: p}
	}
	if len(ev.Tokens) == 0 || bs == 0 {
		return reject(messages.ReasonNoTokens, fmt.Sprintf("%d tokens, block_size %d", len(ev.Tokens), bs))
	}
	if n.cfg.BlockSize != 0 && bs != n.cfg.BlockSize {
		return reject(messages.ReasonBlockSizeMismatch,
			fmt.Sprintf("engine block_size %d, configured %d", bs, n.cfg.BlockSize))
	}
	if h, ok := n.chains.selfReference(ev.BlockHashes, ev.Parent); ok {
		return reject(messages.ReasonSelfReferencingChain, fmt.Sprintf("block hash %d repeats in its chain", h))
	}
	salt := ev.CacheSalt
	if salt == "" && ev.Parent.Ok {
		parent := rs.ns[ev.Parent.V]
		if parent.ambiguous {
			return reject(messages.ReasonAmbiguousCacheNamespace,
				fmt.Sprintf("parent %d was stored under more than one cache namespace", ev.Parent.V))
		}
		salt = parent.salt
	}
	opt := blockhash.Options{Seed: n.seed(ev.LoraName, salt), Eagle: ev.Bigram}
	if ev.MM != nil {
		opt.MM = func(i int) []uint64 {
			if i < len(ev.MM) {
				return ev.MM[i]
			}
			return nil
		}
	}
	n.local = n.hasher.Hash(n.local[:0], ev.Tokens, bs, opt)
	count := min(len(n.local), len(ev.BlockHashes))
	if count == 0 {
		return reject(messages.ReasonNoTokens,
			fmt.Sprintf("%d tokens make no complete block of %d", len(ev.Tokens), bs))
	}
	p.Event.Kind = messages.KindStored
	p.Event.HasParent = ev.Parent.Ok
	p.Event.ParentHash = messages.ExternalHash(ev.Parent.V)
	p.Event.Blocks = make([]messages.StoredBlock, count)
	for i := range count {
		h := ev.BlockHashes[i]
		p.Event.Blocks[i] = messages.StoredBlock{BlockHash: messages.ExternalHash(h), TokensHash: messages.LocalHash(n.local[i])}
		if !rs.remember(h, salt, n.cfg.MaxNamespaceBlocks) {
			n.stats.NamespaceOverflow++
		}
	}
	p.SessionID = ev.SessionID
	return Outcome{Event: p}
}

// seed returns the (memoized) hash seed of a namespace.
func (n *Normalizer) seed(lora, salt string) blockhash.Seed {
	if lora == "" && salt == "" {
		return blockhash.DefaultSeed
	}
	k := nsName{lora, salt}
	s, ok := n.seeds[k]
	if !ok {
		if len(n.seeds) >= maxSeeds {
			clear(n.seeds)
		}
		s = blockhash.NamespaceSeed(lora, salt)
		n.seeds[k] = s
	}
	return s
}

// maxSeeds bounds the seed memo (namespaces come from untrusted input).
const maxSeeds = 4096

// remember records that engine hash h was stored under salt. Blocks of the
// default namespace are only tracked when the hash is already known under a
// salt (that makes it ambiguous). It reports false when the cap stopped it.
func (r *rankState) remember(h uint64, salt string, max int) bool {
	e, ok := r.ns[h]
	if !ok {
		if salt == "" {
			return true
		}
		if len(r.ns) >= max {
			return false
		}
		e.salt = salt
	} else if e.salt != salt {
		e.ambiguous = true
	}
	e.refs++
	r.ns[h] = e
	return true
}

// forget drops one live store of engine hash h.
func (r *rankState) forget(h uint64) {
	e, ok := r.ns[h]
	if !ok {
		return
	}
	if e.refs <= 1 {
		delete(r.ns, h)
		return
	}
	e.refs--
	r.ns[h] = e
}

// chainCheck finds block hashes that repeat in their chain; it keeps the
// set that long chains are checked with between events.
type chainCheck struct {
	seen hashtab.Map[uint64, struct{}]
}

// maxSeenKept is the longest chain whose set chainCheck keeps for the next
// one (a huge event does not pin its table).
const maxSeenKept = 4096

// selfReference finds a block hash that repeats within the event or equals
// its parent.
func (c *chainCheck) selfReference(hashes []uint64, parent wire.Opt[uint64]) (uint64, bool) {
	if len(hashes) <= 64 {
		// A 1,024-bit filter of the hashes seen: only a hash whose bit is
		// already set is compared with the earlier ones (a few per event;
		// hashes made to collide cost the comparisons of every pair, no
		// more).
		var seen [16]uint64
		for i, h := range hashes {
			if parent.Ok && h == parent.V {
				return h, true
			}
			b := (h * 0x9e3779b97f4a7c15) >> 54
			w, bit := b>>6, uint64(1)<<(b&63)
			if seen[w]&bit != 0 {
				for _, g := range hashes[:i] {
					if g == h {
						return h, true
					}
				}
			}
			seen[w] |= bit
		}
		return 0, false
	}
	// A longer chain goes through a set (keyed, like the index's tables:
	// hashes cannot be made to collide), reused from event to event.
	if len(hashes) > maxSeenKept {
		defer func() { c.seen = hashtab.Map[uint64, struct{}]{} }()
	}
	c.seen.Clear()
	if parent.Ok {
		c.seen.Put(parent.V, struct{}{})
	}
	for _, h := range hashes {
		if !c.seen.Put(h, struct{}{}) {
			return h, true
		}
	}
	return 0, false
}

func optString(o wire.Opt[int64]) string {
	if !o.Ok {
		return "absent"
	}
	return fmt.Sprint(o.V)
}
