package bench

// Sharding-key comparison for the index's shard actors
// (actors/indexer/README.md, "Sharding"): the Mooncake conversation trace is served by simulated engine caches
// (finite LRU, so removes happen), their events are applied to an unsharded
// radix.Tree and to sharded indexes built from radix.Tree values, and every
// query's merged answer is checked against the unsharded tree's.
//
// Designs (N shards, one radix.Tree each):
//
//   - worker: shard = hash(worker) mod N; a query fans out to all N shards,
//     the scores are disjoint and concatenated, frequencies add.
//   - branch-hash / branch-ll: branch sharding made exact. The "trunk" —
//     every block at depth 0, plus any prefix promoted by branch-adapt — is
//     replicated on every shard; a chain's branch is the first block below
//     the trunk, i.e. (block 0, block 1) for a plain chain, the reference's
//     2-block key. All blocks of a branch, for all workers, live on one
//     shard: hash(branch key) mod N (branch-hash) or the shard holding the
//     fewest entries when the branch first appears (branch-ll, the
//     reference's rule). A query walks the trunk, looks its branch up and
//     touches exactly one shard; a query that is all trunk or whose branch
//     no worker holds goes to any shard, round-robin (all hold the trunk),
//     so it still gets its block-0 scores. Continuations find their branch
//     in a per-worker table engine hash → trunk node | branch, which also
//     routes removes.
//   - branch-adapt: branch-ll plus hot-branch promotion. When one branch
//     holds more entries than a whole shard's fair share (total/N, and at
//     least minSplit), its first block — and the blocks below it while the
//     branch does not fork across workers — join the trunk, and each child
//     below the fork becomes a branch of its own, placed largest first on
//     the least-loaded shard. The moved blocks are read from the owning
//     shard's Dump and re-applied (counted as migrated). A long shared
//     system prompt therefore ends up replicated, and conversations below
//     it spread again.
//
// branch-ref is the reference's rule taken literally (a continuation
// inherits its root's shard; an unknown branch answers nothing). It is not
// exact: a worker's later conversations continue block 0 of its first one,
// so they stay on that chain's shard while queries go to their own key's
// shard, and block-0 scores of other branches are lost. It is measured to
// show that, not proposed. Trunk replication is what makes the branch
// designs answer exactly like the unsharded tree.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/blockhash"
)

const shBlockTokens = 16 // tokens per Mooncake hash_id, and per block

var shOpt = radix.MatchOptions{Frequencies: true}

func shMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// ---------------------------------------------------------------------------
// Workload: prompts → simulated caches → RouterEvents, with the unsharded
// tree's answer to every query.

// shSource is a prompt stream.
type shSource struct {
	name   string
	random bool // simengine.RandomDriver instead of the trace
	limit  int  // requests (0: the whole trace)
	// sys prepends the same sys blocks to every prompt: a long shared system
	// prompt, the hot-branch stress case.
	sys int
	// shared is how many leading blocks every prompt shares; a request whose
	// best overlap is deeper than that sticks to that worker.
	shared int
}

func (s shSource) driver(tb testing.TB) (simengine.Driver, func()) {
	if s.random {
		d, err := simengine.NewRandomDriver(simengine.RandomConfig{Seed: 11, BlockSize: shBlockTokens, Prefixes: 24, Limit: s.limit})
		if err != nil {
			tb.Fatal(err)
		}
		return d, func() {}
	}
	d, err := simengine.OpenTrace(tracePath, simengine.TraceConfig{TokensPerBlock: shBlockTokens, Limit: s.limit})
	if err != nil {
		tb.Fatal(err)
	}
	return d, func() { d.Close() }
}

// shStep is one request: the query made before routing it (local hashes
// of its complete blocks), the fingerprint of the unsharded answer, and
// the events serving it caused.
type shStep struct {
	q    []messages.LocalHash
	fp   uint64
	best uint32 // the deepest overlap of the unsharded answer
	evs  []messages.RouterEvent
}

type shRecording struct {
	src      shSource
	workers  int
	capacity int
	steps    []shStep
	size     radix.Size // the unsharded index at the end
	cache    simengine.CacheStats
}

// shRecord serves the source's prompts on workers simulated caches. Routing:
// a request whose best overlap in the unsharded tree is deeper than the
// shared prefix goes to that worker (the least used among equals), others
// round-robin — so conversations stick to a worker as with a KV-aware
// router and the load still spreads.
func shRecord(tb testing.TB, src shSource, workers, capacity int) *shRecording {
	drv, done := src.driver(tb)
	defer done()
	var sys []uint32
	if src.sys > 0 {
		r := rand.New(rand.NewPCG(42, 42))
		for range src.sys * shBlockTokens {
			sys = append(sys, r.Uint32N(151936))
		}
	}
	caches := make([]*simengine.Cache, workers)
	for i := range caches {
		var err error
		if caches[i], err = simengine.NewCache(simengine.Config{BlockSize: shBlockTokens, CapacityBlocks: capacity, HashSeed: uint64(i) + 1}); err != nil {
			tb.Fatal(err)
		}
	}
	rec := &shRecording{src: src, workers: workers, capacity: capacity}
	ref := radix.New(radix.Config{})
	var h blockhash.Hasher
	var ov radix.Overlap
	var buf []radix.Score
	var scratch []uint64
	served := make([]int, workers)
	rr := 0
	for {
		p, err := drv.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		tokens := p.Tokens
		if len(sys) > 0 {
			tokens = append(append(make([]uint32, 0, len(sys)+len(tokens)), sys...), tokens...)
		}
		scratch = h.Hash(scratch[:0], tokens, shBlockTokens, blockhash.Options{})
		st := shStep{q: make([]messages.LocalHash, len(scratch))}
		for i, x := range scratch {
			st.q[i] = messages.LocalHash(x)
		}
		ref.FindMatches(st.q, shOpt, &ov)
		st.fp, buf = shFingerprint(ov.Scores, ov.Frequencies, buf)
		st.best = shBest(ov.Scores)

		w, best := -1, uint32(src.shared)
		for _, s := range ov.Scores {
			x := int(s.Key.Worker)
			if s.Blocks > best || s.Blocks == best && w >= 0 && (served[x] < served[w] || served[x] == served[w] && x < w) {
				w, best = x, s.Blocks
			}
		}
		if w < 0 {
			w, rr = rr%workers, rr+1
		}
		served[w]++
		_, evs := caches[w].ServeRequest(simengine.Request{Tokens: tokens})
		for _, ev := range evs {
			re := shConvert(&h, w, ev)
			ref.Apply(re)
			st.evs = append(st.evs, re)
		}
		rec.steps = append(rec.steps, st)
	}
	for _, c := range caches {
		s := c.Stats()
		rec.cache.Requests += s.Requests
		rec.cache.PromptBlocks += s.PromptBlocks
		rec.cache.HitBlocks += s.HitBlocks
		rec.cache.StoredBlocks += s.StoredBlocks
		rec.cache.EvictedBlocks += s.EvictedBlocks
	}
	rec.size = ref.Size()
	return rec
}

// shConvert turns a simulated engine event into the RouterEvent the
// normalizer would emit: local hashes of the block tokens with the default
// namespace seed, device tier, unsequenced (id 0: the sharded designs split
// events, so ids are not theirs to check).
func shConvert(h *blockhash.Hasher, w int, ev simengine.Event) messages.RouterEvent {
	re := messages.RouterEvent{WorkerID: messages.WorkerID(w)}
	switch ev.Kind {
	case simengine.EventStored:
		local := h.Hash(nil, ev.Tokens, ev.BlockSize, blockhash.Options{})
		re.Event = messages.KvCacheEvent{Kind: messages.KindStored, HasParent: ev.HasParent,
			ParentHash: messages.ExternalHash(ev.Parent), Blocks: make([]messages.StoredBlock, len(ev.Hashes))}
		for i, x := range ev.Hashes {
			re.Event.Blocks[i] = messages.StoredBlock{BlockHash: messages.ExternalHash(x), TokensHash: messages.LocalHash(local[i])}
		}
	case simengine.EventRemoved:
		re.Event = messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: make([]messages.ExternalHash, len(ev.Hashes))}
		for i, x := range ev.Hashes {
			re.Event.Removed[i] = messages.ExternalHash(x)
		}
	case simengine.EventCleared:
		re.Event = messages.KvCacheEvent{Kind: messages.KindCleared}
	}
	return re
}

// shFingerprint hashes an answer canonically: scores sorted by stream, then
// the per-depth frequencies.
func shFingerprint(scores []radix.Score, freq []uint32, buf []radix.Score) (uint64, []radix.Score) {
	buf = append(buf[:0], scores...)
	slices.SortFunc(buf, func(a, b radix.Score) int {
		if c := cmp.Compare(a.Key.Worker, b.Key.Worker); c != 0 {
			return c
		}
		return cmp.Compare(a.Key.DpRank, b.Key.DpRank)
	})
	h := shMix(uint64(len(buf)))
	for _, s := range buf {
		h = shMix(h ^ uint64(s.Key.Worker))
		h = shMix(h ^ uint64(s.Key.DpRank)<<32 ^ uint64(s.Blocks))
	}
	h = shMix(h ^ uint64(len(freq)))
	for _, f := range freq {
		h = shMix(h ^ uint64(f))
	}
	return h, buf
}

func shBest(scores []radix.Score) uint32 {
	var b uint32
	for _, s := range scores {
		b = max(b, s.Blocks)
	}
	return b
}

// ---------------------------------------------------------------------------
// Sharded index designs.

type shDesign interface {
	apply(ev messages.RouterEvent)
	// route appends the shards a query goes to.
	route(q []messages.LocalHash, dst []int) []int
	trees() []*radix.Tree
	// dropTable forgets the coordinator's routing state (for the heap
	// measurement; the design is unusable afterwards).
	dropTable()
}

var shDesignNames = []string{"worker", "branch-hash", "branch-ll", "branch-adapt"}

func shNew(name string, n, minSplit int) shDesign {
	ts := make([]*radix.Tree, n)
	for i := range ts {
		ts[i] = radix.New(radix.Config{})
	}
	switch name {
	case "worker":
		return &shWorker{ts: ts}
	case "branch-hash":
		return newShBranch(ts, false, false, minSplit)
	case "branch-ll":
		return newShBranch(ts, true, false, minSplit)
	case "branch-adapt":
		return newShBranch(ts, true, true, minSplit)
	case "branch-ref":
		return &shRef{ts: ts, keys: map[uint64]int32{}, wt: map[messages.WorkerID]*shRefWT{}, load: make([]int, n)}
	}
	panic("unknown design " + name)
}

// shAnswer is a query's merged answer and its scratch.
type shAnswer struct {
	ovs     []radix.Overlap
	shards  []int
	scores  []radix.Score
	freq    []uint32
	mscores []radix.Score
	mfreq   []uint32
}

func shQuery(d shDesign, q []messages.LocalHash, a *shAnswer) {
	a.shards = d.route(q, a.shards[:0])
	for len(a.ovs) < len(a.shards) {
		a.ovs = append(a.ovs, radix.Overlap{})
	}
	ts := d.trees()
	for i, s := range a.shards {
		ts[s].FindMatches(q, shOpt, &a.ovs[i])
	}
	if len(a.shards) == 1 {
		a.scores, a.freq = a.ovs[0].Scores, a.ovs[0].Frequencies
		return
	}
	shMerge(a, len(a.shards))
}

// shMerge merges worker-disjoint answers: scores concatenate, frequencies
// add.
func shMerge(a *shAnswer, k int) {
	a.mscores, a.mfreq = a.mscores[:0], a.mfreq[:0]
	for i := range k {
		ov := &a.ovs[i]
		a.mscores = append(a.mscores, ov.Scores...)
		for j, f := range ov.Frequencies {
			if j < len(a.mfreq) {
				a.mfreq[j] += f
			} else {
				a.mfreq = append(a.mfreq, f)
			}
		}
	}
	a.scores, a.freq = a.mscores, a.mfreq
}

// shWorker shards by worker.
type shWorker struct{ ts []*radix.Tree }

func (d *shWorker) shard(w messages.WorkerID) int { return int(shMix(uint64(w)) % uint64(len(d.ts))) }
func (d *shWorker) apply(ev messages.RouterEvent) { d.ts[d.shard(ev.WorkerID)].Apply(ev) }
func (d *shWorker) trees() []*radix.Tree          { return d.ts }
func (d *shWorker) dropTable()                    {}
func (d *shWorker) route(_ []messages.LocalHash, dst []int) []int {
	for s := range d.ts {
		dst = append(dst, s)
	}
	return dst
}

// shKey names a trunk node or a branch: the block's local hash under a
// trunk node (-1: the root).
type shKey struct {
	parent int32
	hash   messages.LocalHash
}

type shTrunk struct {
	key     shKey
	path    uint64 // content hash of the local hashes root..this block
	holders int32  // workers holding the block
	pinned  bool   // promoted, or above a promoted node: kept at 0 holders
}

type shBr struct {
	key     shKey
	shard   int32
	entries int32 // (block, worker) entries of the branch
	splitAt int32 // branch-adapt: a single chain is not split again below this
}

// shWT is one worker's routing table: engine hash → trunk node, or →
// branch for blocks below the trunk.
type shWT struct {
	trunk map[messages.ExternalHash]int32
	deep  map[messages.ExternalHash]int32
}

type shBranch struct {
	ts          []*radix.Tree
	leastLoaded bool
	adaptive    bool
	minSplit    int
	share       float64 // promote a branch holding more than share × total/N entries

	trunk     []shTrunk
	trunkFree []int32
	trunkIdx  map[shKey]int32
	br        []shBr
	brFree    []int32
	brIdx     map[shKey]int32
	wt        map[messages.WorkerID]*shWT

	load  []int // entries below the trunk per shard
	total int
	rr    int // round-robin for queries any shard can answer

	promotions, migrated, unknownRemoves, detached int
}

const shRootPath = 0x6b76726f75746572

func newShBranch(ts []*radix.Tree, leastLoaded, adaptive bool, minSplit int) *shBranch {
	return &shBranch{ts: ts, leastLoaded: leastLoaded, adaptive: adaptive, minSplit: minSplit, share: 1,
		trunkIdx: map[shKey]int32{}, brIdx: map[shKey]int32{}, wt: map[messages.WorkerID]*shWT{}, load: make([]int, len(ts))}
}

func (d *shBranch) trees() []*radix.Tree { return d.ts }

func (d *shBranch) dropTable() {
	d.trunk, d.trunkFree, d.trunkIdx, d.br, d.brFree, d.brIdx, d.wt = nil, nil, nil, nil, nil, nil, nil
}

func (d *shBranch) pathOf(t int32) uint64 {
	if t < 0 {
		return shRootPath
	}
	return d.trunk[t].path
}

func (d *shBranch) keyPath(k shKey) uint64 { return shMix(d.pathOf(k.parent) ^ shMix(uint64(k.hash))) }

func (d *shBranch) table(w messages.WorkerID) *shWT {
	t := d.wt[w]
	if t == nil {
		t = &shWT{trunk: map[messages.ExternalHash]int32{}, deep: map[messages.ExternalHash]int32{}}
		d.wt[w] = t
	}
	return t
}

func (d *shBranch) newTrunk(k shKey) int32 {
	n := shTrunk{key: k, path: d.keyPath(k)}
	var id int32
	if l := len(d.trunkFree); l > 0 {
		id, d.trunkFree = d.trunkFree[l-1], d.trunkFree[:l-1]
		d.trunk[id] = n
	} else {
		id = int32(len(d.trunk))
		d.trunk = append(d.trunk, n)
	}
	d.trunkIdx[k] = id
	return id
}

func (d *shBranch) newBranch(k shKey) int32 {
	s := int32(d.keyPath(k) % uint64(len(d.ts)))
	if d.leastLoaded {
		s = 0
		for i, l := range d.load {
			if l < d.load[s] {
				s = int32(i)
			}
		}
	}
	b := shBr{key: k, shard: s}
	var id int32
	if l := len(d.brFree); l > 0 {
		id, d.brFree = d.brFree[l-1], d.brFree[:l-1]
		d.br[id] = b
	} else {
		id = int32(len(d.br))
		d.br = append(d.br, b)
	}
	d.brIdx[k] = id
	return id
}

func (d *shBranch) freeBranch(b int32) {
	delete(d.brIdx, d.br[b].key)
	d.brFree = append(d.brFree, b)
}

func (d *shBranch) all(ev messages.RouterEvent) {
	for _, t := range d.ts {
		t.Apply(ev)
	}
}

func (d *shBranch) apply(ev messages.RouterEvent) {
	wt := d.table(ev.WorkerID)
	switch ev.Event.Kind {
	case messages.KindStored:
		d.store(wt, ev)
	case messages.KindRemoved:
		for i, e := range ev.Event.Removed {
			one := ev
			one.Event.Removed = ev.Event.Removed[i : i+1]
			d.remove(wt, one, e)
		}
	case messages.KindCleared:
		d.all(ev)
		for _, t := range wt.trunk {
			d.dropTrunkHolder(t)
		}
		for _, b := range wt.deep {
			d.dropEntry(b)
		}
		clear(wt.trunk)
		clear(wt.deep)
	}
}

func (d *shBranch) store(wt *shWT, ev messages.RouterEvent) {
	blocks := ev.Event.Blocks
	cur, b := int32(-1), int32(-1)
	if ev.Event.HasParent {
		if t, ok := wt.trunk[ev.Event.ParentHash]; ok {
			cur = t
		} else if x, ok := wt.deep[ev.Event.ParentHash]; ok {
			b = x
		} else {
			// Unknown parent: every tree keeps such a chain detached and
			// never matches it. Not produced by the simulated engines.
			d.detached++
			d.ts[shMix(uint64(ev.Event.ParentHash))%uint64(len(d.ts))].Apply(ev)
			return
		}
	}
	i := 0
	if b < 0 {
		for ; i < len(blocks); i++ {
			k := shKey{cur, blocks[i].TokensHash}
			t, ok := d.trunkIdx[k]
			if !ok {
				if cur >= 0 {
					break // the first block below the trunk: the branch
				}
				t = d.newTrunk(k) // depth 0 is always trunk
			}
			if _, held := wt.trunk[blocks[i].BlockHash]; !held {
				wt.trunk[blocks[i].BlockHash] = t
				d.trunk[t].holders++
			}
			cur = t
		}
		if i > 0 {
			tr := ev
			tr.Event.Blocks = blocks[:i]
			d.all(tr)
		}
		if i == len(blocks) {
			return
		}
		k := shKey{cur, blocks[i].TokensHash}
		var ok bool
		if b, ok = d.brIdx[k]; !ok {
			b = d.newBranch(k)
		}
	}
	deep := ev
	deep.Event.Blocks = blocks[i:]
	if i > 0 {
		deep.Event.HasParent, deep.Event.ParentHash = true, blocks[i-1].BlockHash
	}
	s := d.br[b].shard
	d.ts[s].Apply(deep)
	for _, bl := range blocks[i:] {
		if _, held := wt.deep[bl.BlockHash]; !held {
			wt.deep[bl.BlockHash] = b
			d.br[b].entries++
			d.load[s]++
			d.total++
		}
	}
	if d.adaptive {
		d.maybePromote(b)
	}
}

func (d *shBranch) remove(wt *shWT, one messages.RouterEvent, e messages.ExternalHash) {
	if t, ok := wt.trunk[e]; ok {
		delete(wt.trunk, e)
		d.all(one)
		d.dropTrunkHolder(t)
		return
	}
	if b, ok := wt.deep[e]; ok {
		delete(wt.deep, e)
		d.ts[d.br[b].shard].Apply(one)
		d.dropEntry(b)
		return
	}
	d.unknownRemoves++
	d.all(one)
}

func (d *shBranch) dropTrunkHolder(t int32) {
	if d.trunk[t].holders--; d.trunk[t].holders == 0 && !d.trunk[t].pinned {
		delete(d.trunkIdx, d.trunk[t].key)
		d.trunkFree = append(d.trunkFree, t)
	}
}

func (d *shBranch) dropEntry(b int32) {
	d.load[d.br[b].shard]--
	d.total--
	if d.br[b].entries--; d.br[b].entries == 0 {
		d.freeBranch(b)
	}
}

func (d *shBranch) route(q []messages.LocalHash, dst []int) []int {
	n := uint64(len(d.ts))
	cur, i := int32(-1), 0
	for ; i < len(q); i++ {
		t, ok := d.trunkIdx[shKey{cur, q[i]}]
		if !ok {
			break
		}
		cur = t
	}
	if i < len(q) {
		if b, ok := d.brIdx[shKey{cur, q[i]}]; ok {
			return append(dst, int(d.br[b].shard))
		}
	}
	// All trunk, or a branch no worker holds: every shard has the answer
	// (the trunk). Round-robin, or a popular short prompt (the system
	// prompt alone) would pin one shard.
	d.rr++
	return append(dst, int(uint64(d.rr)%n))
}

// trunkEntries counts the (block, worker) entries of the trunk.
func (d *shBranch) trunkEntries() int {
	n := 0
	for _, wt := range d.wt {
		n += len(wt.trunk)
	}
	return n
}

func (d *shBranch) maybePromote(b int32) {
	n := len(d.ts)
	e := int(d.br[b].entries)
	if n == 1 || e < d.minSplit || e < int(d.br[b].splitAt) || float64(e*n) <= d.share*float64(d.total) {
		return
	}
	d.promote(b)
}

// shMove is one block of a branch being promoted, as the owning shard's
// dump gives it.
type shMove struct {
	w         messages.WorkerID
	e, parent messages.ExternalHash
	hash      messages.LocalHash
	u         int32 // node of the branch's union trie (over all workers)
}

type shWE struct {
	w messages.WorkerID
	e messages.ExternalHash
}

// promote moves branch b's first block — and the blocks below it down to
// where the branch forks across workers — into the trunk, and makes each
// child below the fork a branch of its own, largest first on the
// least-loaded shard.
func (d *shBranch) promote(b int32) {
	old := d.br[b]
	s := old.shard
	type unode struct {
		parent, kid, kids int32
		hash              messages.LocalHash
	}
	nodes := []unode{{parent: -1, hash: old.key.hash}}
	uidx := map[shKey]int32{}
	where := map[shWE]int32{}
	var moves []shMove
	for _, ev := range d.ts[s].Dump() {
		wt := d.wt[ev.WorkerID]
		if wt == nil || ev.Event.Kind != messages.KindStored {
			continue
		}
		parent := ev.Event.ParentHash
		for _, bl := range ev.Event.Blocks {
			p := parent
			parent = bl.BlockHash
			if x, ok := wt.deep[bl.BlockHash]; !ok || x != b {
				continue
			}
			if _, dup := where[shWE{ev.WorkerID, bl.BlockHash}]; dup {
				continue
			}
			var u int32 // the branch's first block: its parent is in the trunk
			if pu, ok := where[shWE{ev.WorkerID, p}]; ok {
				k := shKey{pu, bl.TokensHash}
				if u, ok = uidx[k]; !ok {
					u = int32(len(nodes))
					nodes = append(nodes, unode{parent: pu, kid: -1, hash: bl.TokensHash})
					nodes[pu].kids++
					nodes[pu].kid = u
					uidx[k] = u
				}
			}
			where[shWE{ev.WorkerID, bl.BlockHash}] = u
			moves = append(moves, shMove{w: ev.WorkerID, e: bl.BlockHash, parent: p, hash: bl.TokensHash, u: u})
		}
	}
	path := []int32{0}
	for f := int32(0); nodes[f].kids < 2; {
		if nodes[f].kids == 0 { // one chain, no fork: nothing to spread
			d.br[b].splitAt = 2 * old.entries
			return
		}
		f = nodes[f].kid
		path = append(path, f)
	}
	fork := path[len(path)-1]
	tOf := make([]int32, len(nodes))
	for i := range tOf {
		tOf[i] = -1
	}
	for t := old.key.parent; t >= 0; t = d.trunk[t].key.parent {
		d.trunk[t].pinned = true
	}
	pt := old.key.parent
	for _, u := range path {
		pt = d.newTrunk(shKey{pt, nodes[u].hash})
		d.trunk[pt].pinned = true
		tOf[u] = pt
	}
	d.load[s] -= int(old.entries)
	d.total -= int(old.entries)
	d.freeBranch(b)

	// The subtrees below the fork, by the fork's child they hang from.
	top := make([]int32, len(nodes))
	size := map[int32]int{}
	for u := range nodes {
		switch {
		case tOf[u] >= 0:
			top[u] = -1
		case nodes[u].parent == fork:
			top[u] = int32(u)
		default:
			top[u] = top[nodes[u].parent]
		}
	}
	for _, m := range moves {
		if top[m.u] >= 0 {
			size[top[m.u]]++
		}
	}
	kids := make([]int32, 0, len(size))
	for c := range size {
		kids = append(kids, c)
	}
	slices.SortFunc(kids, func(x, y int32) int {
		if c := cmp.Compare(size[y], size[x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	nb := map[int32]int32{}
	for _, c := range kids {
		id := d.newBranch(shKey{tOf[fork], nodes[c].hash})
		nb[c] = id
		d.br[id].entries = int32(size[c])
		d.load[d.br[id].shard] += size[c]
		d.total += size[c]
	}

	per := make([][]messages.RouterEvent, len(d.ts))
	storeOne := func(m shMove) messages.RouterEvent {
		return messages.RouterEvent{WorkerID: m.w, Event: messages.KvCacheEvent{Kind: messages.KindStored, HasParent: true,
			ParentHash: m.parent, Blocks: []messages.StoredBlock{{BlockHash: m.e, TokensHash: m.hash}}}}
	}
	for _, m := range moves {
		wt := d.wt[m.w]
		if t := tOf[m.u]; t >= 0 {
			delete(wt.deep, m.e)
			wt.trunk[m.e] = t
			d.trunk[t].holders++
			for x := range per {
				if x != int(s) {
					per[x] = append(per[x], storeOne(m))
					d.migrated++
				}
			}
			continue
		}
		id := nb[top[m.u]]
		wt.deep[m.e] = id
		if x := d.br[id].shard; x != s {
			per[x] = append(per[x], storeOne(m))
			d.migrated++
			if m.u == top[m.u] { // drops the subtree from the old shard
				per[s] = append(per[s], messages.RouterEvent{WorkerID: m.w, Event: messages.KvCacheEvent{
					Kind: messages.KindRemoved, Removed: []messages.ExternalHash{m.e}}})
			}
		}
	}
	for x, evs := range per {
		for _, ev := range evs {
			d.ts[x].Apply(ev)
		}
	}
	d.promotions++
}

// shRef is the reference's rule taken literally: a root chain's branch key
// is its first ≤ 2 blocks, placed on the least-loaded shard when new; every
// continuation inherits its parent's shard (and, extending a 1-block chain,
// registers its 2-block key there unless taken); a query goes to its key's
// shard, an unknown key answers nothing. Not exact — measured, not used.
type shRef struct {
	ts   []*radix.Tree
	keys map[uint64]int32
	wt   map[messages.WorkerID]*shRefWT
	load []int
}

type shRefWT struct {
	shard map[messages.ExternalHash]int32
	root  map[messages.ExternalHash]messages.LocalHash // local hash of depth-0 blocks
}

func shRefKey(hs ...messages.LocalHash) uint64 {
	k := uint64(shRootPath)
	for _, h := range hs {
		k = shMix(k ^ shMix(uint64(h)))
	}
	return k
}

func (d *shRef) trees() []*radix.Tree { return d.ts }
func (d *shRef) dropTable()           { d.keys, d.wt = nil, nil }

func (d *shRef) apply(ev messages.RouterEvent) {
	wt := d.wt[ev.WorkerID]
	if wt == nil {
		wt = &shRefWT{shard: map[messages.ExternalHash]int32{}, root: map[messages.ExternalHash]messages.LocalHash{}}
		d.wt[ev.WorkerID] = wt
	}
	n := uint64(len(d.ts))
	switch ev.Event.Kind {
	case messages.KindStored:
		bs := ev.Event.Blocks
		var s int32
		if ev.Event.HasParent {
			x, ok := wt.shard[ev.Event.ParentHash]
			if !ok {
				x = int32(shMix(uint64(ev.Event.ParentHash)) % n)
			}
			s = x
			if l0, ok := wt.root[ev.Event.ParentHash]; ok {
				if k := shRefKey(l0, bs[0].TokensHash); d.keys[k] == 0 {
					d.keys[k] = s + 1
				}
			}
		} else {
			k := shRefKey(bs[0].TokensHash)
			if len(bs) > 1 {
				k = shRefKey(bs[0].TokensHash, bs[1].TokensHash)
			}
			if d.keys[k] == 0 {
				for i, l := range d.load {
					if l < d.load[s] {
						s = int32(i)
					}
				}
				d.keys[k] = s + 1
			}
			s = d.keys[k] - 1
			wt.root[bs[0].BlockHash] = bs[0].TokensHash
		}
		d.ts[s].Apply(ev)
		for _, b := range bs {
			if _, ok := wt.shard[b.BlockHash]; !ok {
				wt.shard[b.BlockHash] = s
				d.load[s]++
			}
		}
	case messages.KindRemoved:
		for i, e := range ev.Event.Removed {
			one := ev
			one.Event.Removed = ev.Event.Removed[i : i+1]
			if s, ok := wt.shard[e]; ok {
				d.ts[s].Apply(one)
				delete(wt.shard, e)
				delete(wt.root, e)
				d.load[s]--
				continue
			}
			for _, t := range d.ts {
				t.Apply(one)
			}
		}
	case messages.KindCleared:
		for _, t := range d.ts {
			t.Apply(ev)
		}
		for _, s := range wt.shard {
			d.load[s]--
		}
		clear(wt.shard)
		clear(wt.root)
	}
}

func (d *shRef) route(q []messages.LocalHash, dst []int) []int {
	if len(q) == 0 {
		return dst
	}
	k := shRefKey(q[0])
	if len(q) > 1 {
		k = shRefKey(q[0], q[1])
	}
	if s := d.keys[k]; s != 0 {
		return append(dst, int(s-1))
	}
	return dst
}

// ---------------------------------------------------------------------------
// Replay and checks.

// shReplayResult is what replaying a recording through a design gives.
type shReplayResult struct {
	mismatches, first int // queries whose answer differs from the unsharded tree's; first index
	bestDiffs         int // … whose deepest overlap differs (the routing decision can change)
	queries           []int
	shardsTouched     int
	apply             time.Duration // applying the events, routing table included
}

// shReplay queries the design before each request, as the router would,
// compares the merged answer with the unsharded tree's, then applies the
// request's events.
func shReplay(rec *shRecording, d shDesign) shReplayResult {
	res := shReplayResult{first: -1, queries: make([]int, len(d.trees()))}
	var a shAnswer
	var buf []radix.Score
	for i := range rec.steps {
		st := &rec.steps[i]
		shQuery(d, st.q, &a)
		var fp uint64
		fp, buf = shFingerprint(a.scores, a.freq, buf)
		if fp != st.fp {
			if res.mismatches == 0 {
				res.first = i
			}
			res.mismatches++
			if shBest(a.scores) != st.best {
				res.bestDiffs++
			}
		}
		for _, s := range a.shards {
			res.queries[s]++
		}
		res.shardsTouched += len(a.shards)
		if len(st.evs) > 0 {
			t0 := time.Now()
			for _, ev := range st.evs {
				d.apply(ev)
			}
			res.apply += time.Since(t0)
		}
	}
	return res
}

// shCheckState checks a design's trees against its own bookkeeping and
// the unsharded tree: no detached blocks, every (block, worker) entry where
// the routing table says it is.
func shCheckState(t testing.TB, rec *shRecording, d shDesign) {
	t.Helper()
	var entries, detached int
	for _, tr := range d.trees() {
		sz := tr.Size()
		entries += sz.Entries
		detached += sz.Detached
	}
	if detached != 0 {
		t.Errorf("%d detached blocks", detached)
	}
	want := rec.size.Entries
	if b, ok := d.(*shBranch); ok {
		te := b.trunkEntries()
		if b.total+te != rec.size.Entries {
			t.Errorf("routing table: %d trunk + %d branch entries, unsharded tree has %d", te, b.total, rec.size.Entries)
		}
		want = b.total + te*len(b.ts)
		if b.detached != 0 || b.unknownRemoves != 0 {
			t.Errorf("%d detached stores, %d unknown removes", b.detached, b.unknownRemoves)
		}
	}
	if entries != want {
		t.Errorf("shards hold %d entries, want %d", entries, want)
	}
}

// TestShardingExact replays trace slices (plain, and with an 8-block shared
// system prompt: the hot-branch case) and a random prefix workload over 16
// workers with small caches, and checks that every design answers every
// query exactly like the unsharded tree, for 2, 4 and 8 shards. It also
// checks that the hot branch pins the reference's 2-block key to one shard
// and that branch-adapt spreads it. The measurement itself is
// TestShardingMeasure.
func TestShardingExact(t *testing.T) {
	limit := 3000
	if testing.Short() {
		limit = 1000
	}
	for _, src := range []shSource{
		{name: "mooncake", limit: limit, shared: 1},
		{name: "mooncake+sys8", limit: limit, sys: 8, shared: 9},
		{name: "random", random: true, limit: limit, shared: 1},
	} {
		t.Run(src.name, func(t *testing.T) {
			rec := shRecord(t, src, 16, 96)
			if rec.cache.EvictedBlocks == 0 {
				t.Fatalf("no evictions: %+v", rec.cache)
			}
			spread := map[string]float64{}
			var promos []string
			for _, name := range shDesignNames {
				for _, n := range []int{2, 4, 8} {
					d := shNew(name, n, 256)
					res := shReplay(rec, d)
					if res.mismatches != 0 {
						t.Errorf("%s N=%d: %d of %d answers differ from the unsharded tree, first at request %d",
							name, n, res.mismatches, len(rec.steps), res.first)
					}
					shCheckState(t, rec, d)
					if n == 4 {
						spread[name] = shMaxMean(d, func(sz radix.Size) int { return sz.Entries })
					}
					if b, ok := d.(*shBranch); ok && b.adaptive {
						promos = append(promos, fmt.Sprintf("N=%d: %d/%d", n, b.promotions, b.migrated))
					}
					if b, ok := d.(*shBranch); ok && src.sys > 0 && b.adaptive && b.promotions == 0 {
						t.Errorf("%s N=%d: the hot system prompt was never promoted", name, n)
					}
				}
			}
			// Aggressive promotion (a branch above 1/20 of a fair share):
			// many migrations, nested and under eviction, must stay exact.
			for _, n := range []int{2, 8} {
				d := shNew("branch-adapt", n, 32)
				b := d.(*shBranch)
				b.share = 0.05
				if res := shReplay(rec, d); res.mismatches != 0 {
					t.Errorf("branch-adapt N=%d aggressive: %d answers differ, first at request %d", n, res.mismatches, res.first)
				}
				shCheckState(t, rec, d)
				if src.random && b.promotions < 10 { // trace conversations are single chains: nothing to split
					t.Errorf("branch-adapt N=%d aggressive: only %d promotions", n, b.promotions)
				}
				promos = append(promos, fmt.Sprintf("N=%d aggressive: %d/%d", n, b.promotions, b.migrated))
			}
			// The check has teeth: the reference's literal rule loses
			// block-0 scores (and, on the trace, whole conversations).
			ref := shReplay(rec, shNew("branch-ref", 4, 0))
			if src.sys == 0 && ref.mismatches == 0 {
				t.Errorf("branch-ref: no answer differs from the unsharded tree")
			}
			t.Logf("%d requests, %d blocks stored, %d evicted; N=4 entries max/mean: %v; branch-adapt promotions/migrated blocks: %v; "+
				"branch-ref N=4: %d answers differ, %d in their deepest overlap",
				len(rec.steps), rec.cache.StoredBlocks, rec.cache.EvictedBlocks, spread, promos, ref.mismatches, ref.bestDiffs)
			if src.sys > 0 && spread["branch-adapt"] >= spread["branch-ll"] {
				t.Errorf("hot branch: branch-adapt entries max/mean %.2f, not below branch-ll's %.2f",
					spread["branch-adapt"], spread["branch-ll"])
			}
		})
	}
}

// shMaxMean is max/mean over shards of a Size figure.
func shMaxMean(d shDesign, f func(radix.Size) int) float64 {
	mx, sum := 0, 0
	for _, tr := range d.trees() {
		v := f(tr.Size())
		mx = max(mx, v)
		sum += v
	}
	if sum == 0 {
		return 0
	}
	return float64(mx) * float64(len(d.trees())) / float64(sum)
}
