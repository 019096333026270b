package clusterpb

import (
	"errors"
	"fmt"

	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// ErrMalformed wraps every refusal of a proto message that does not fit
// its plain type.
var ErrMalformed = errors.New("malformed cluster message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// FromBatch converts a batch for another host.
func FromBatch(b *messages.RouterEventBatch) *RouterEventBatch {
	out := &RouterEventBatch{Clear: fromKeys(b.Clear), Events: FromEvents(b.Events)}
	if b.Position != (messages.Position{}) {
		out.Position = fromPosition(b.Position)
	}
	out.Trace = fromTrace(b.Trace)
	return out
}

// ToBatch converts a batch from another host.
func ToBatch(p *RouterEventBatch) (*messages.RouterEventBatch, error) {
	events, err := ToEvents(p.GetEvents())
	if err != nil {
		return nil, err
	}
	b := &messages.RouterEventBatch{Clear: toKeys(p.GetClear()), Events: events}
	if p.GetPosition() != nil {
		b.Position = toPosition(p.Position)
	}
	if b.Trace, err = toTrace(p.GetTrace()); err != nil {
		return nil, err
	}
	return b, nil
}

// FromEvents converts router events for another host.
func FromEvents(evs []messages.RouterEvent) []*RouterEvent {
	if len(evs) == 0 {
		return nil
	}
	out := make([]*RouterEvent, len(evs))
	for i := range evs {
		ev := &evs[i]
		e := &ev.Event
		out[i] = &RouterEvent{
			WorkerId:    uint64(ev.WorkerID),
			StorageTier: StorageTier(ev.StorageTier),
			SessionId:   bytesOf(ev.SessionID),
			Event: &KvCacheEvent{
				EventId: e.EventID, DpRank: uint32(e.DpRank), Kind: EventKind(e.Kind),
				HasParent: e.HasParent, ParentHash: uint64(e.ParentHash),
				Removed: u64s(e.Removed), Offloaded: u64s(e.Offloaded),
			},
		}
		if n := len(e.Blocks); n > 0 {
			out[i].Event.BlockHashes, out[i].Event.TokensHashes = make([]uint64, n), make([]uint64, n)
			for j, b := range e.Blocks {
				out[i].Event.BlockHashes[j], out[i].Event.TokensHashes[j] = uint64(b.BlockHash), uint64(b.TokensHash)
			}
		}
	}
	return out
}

// ToEvents converts router events from another host.
func ToEvents(ps []*RouterEvent) ([]messages.RouterEvent, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	out := make([]messages.RouterEvent, len(ps))
	for i, p := range ps {
		e := p.GetEvent()
		if p.StorageTier < 0 || p.StorageTier > 0xff || e.GetKind() < 0 || e.GetKind() > 0xff {
			return nil, malformed("event %d: tier %d, kind %d", i, p.StorageTier, e.GetKind())
		}
		if len(e.GetBlockHashes()) != len(e.GetTokensHashes()) {
			return nil, malformed("event %d: %d block hashes, %d token hashes", i, len(e.GetBlockHashes()), len(e.GetTokensHashes()))
		}
		ev := messages.RouterEvent{
			WorkerID:    messages.WorkerID(p.WorkerId),
			StorageTier: messages.StorageTier(p.StorageTier),
			SessionID:   string(p.SessionId),
			Event: messages.KvCacheEvent{
				EventID: e.GetEventId(), DpRank: messages.DpRank(e.GetDpRank()), Kind: messages.EventKind(e.GetKind()),
				HasParent: e.GetHasParent(), ParentHash: messages.ExternalHash(e.GetParentHash()),
				Removed: hashes[messages.ExternalHash](e.GetRemoved()), Offloaded: hashes[messages.ExternalHash](e.GetOffloaded()),
			},
		}
		if n := len(e.GetBlockHashes()); n > 0 {
			ev.Event.Blocks = make([]messages.StoredBlock, n)
			for j := range n {
				ev.Event.Blocks[j] = messages.StoredBlock{BlockHash: messages.ExternalHash(e.BlockHashes[j]), TokensHash: messages.LocalHash(e.TokensHashes[j])}
			}
		}
		out[i] = ev
	}
	return out, nil
}

// FromQuery converts a query for another host.
func FromQuery(q *indexer.QueryRequest) *QueryRequest {
	o := q.Options
	return &QueryRequest{Hashes: u64s(q.Hashes), Options: &MatchOptions{
		EarlyExit: o.EarlyExit, Frequencies: o.Frequencies, TreeSizes: o.TreeSizes, Tiers: o.Tiers},
		Trace: fromTrace(q.Trace)}
}

// ToQuery converts a query from another host. A malformed trace context is
// dropped (the query is answered untraced): tracing is never a reason to
// refuse a route.
func ToQuery(p *QueryRequest) *indexer.QueryRequest {
	o := p.GetOptions()
	tc, _ := toTrace(p.GetTrace())
	return &indexer.QueryRequest{Hashes: hashes[messages.LocalHash](p.GetHashes()), Options: radix.MatchOptions{
		EarlyExit: o.GetEarlyExit(), Frequencies: o.GetFrequencies(), TreeSizes: o.GetTreeSizes(), Tiers: o.GetTiers()},
		Trace: tc}
}

// fromTrace converts a trace context (nil when not traced).
func fromTrace(tc messages.TraceContext) *TraceContext {
	if tc == (messages.TraceContext{}) {
		return nil
	}
	return &TraceContext{TraceId: tc.TraceID[:], SpanId: tc.SpanID[:], Flags: uint32(tc.Flags)}
}

// toTrace converts a trace context from another host (zero when absent).
func toTrace(t *TraceContext) (messages.TraceContext, error) {
	var tc messages.TraceContext
	if t == nil {
		return tc, nil
	}
	if len(t.TraceId) != len(tc.TraceID) || len(t.SpanId) != len(tc.SpanID) || t.Flags > 0xff {
		return tc, malformed("trace context: %d-byte trace id, %d-byte span id, flags %d", len(t.TraceId), len(t.SpanId), t.Flags)
	}
	copy(tc.TraceID[:], t.TraceId)
	copy(tc.SpanID[:], t.SpanId)
	tc.Flags = byte(t.Flags)
	return tc, nil
}

// FromQueryResult converts a shard's answer for another host (status set
// by the caller).
func FromQueryResult(r *indexer.QueryResult) *QueryResult {
	out := &QueryResult{Frequencies: r.Frequencies}
	if len(r.Scores) > 0 {
		out.Scores = make([]*Score, len(r.Scores))
		for i, s := range r.Scores {
			out.Scores[i] = &Score{Key: fromKey(s.Key), Blocks: s.Blocks, TreeSize: s.TreeSize}
			if s.Tiers != [4]uint32{} {
				out.Scores[i].Tiers = s.Tiers[:]
			}
		}
	}
	return out
}

// ToQueryResult converts a shard's answer from another host.
func ToQueryResult(p *QueryResult) (*indexer.QueryResult, error) {
	out := &indexer.QueryResult{Frequencies: p.GetFrequencies()}
	if len(p.GetScores()) > 0 {
		out.Scores = make([]radix.Score, len(p.Scores))
		for i, s := range p.Scores {
			if len(s.Tiers) > len(out.Scores[i].Tiers) {
				return nil, malformed("score %d: %d tiers", i, len(s.Tiers))
			}
			out.Scores[i] = radix.Score{Key: toKey(s.GetKey()), Blocks: s.Blocks, TreeSize: s.TreeSize}
			copy(out.Scores[i].Tiers[:], s.Tiers)
		}
	}
	return out, nil
}

// FromStats converts a shard's stats for another host.
func FromStats(s *indexer.Stats) *Stats {
	out := &Stats{Tree: fromRadixStats(s.Tree), Size: fromSize(s.Size)}
	for _, k := range sortedKeys(s.TreeSizes) {
		out.TreeSizes = append(out.TreeSizes, &StreamSize{Key: fromKey(k), Size: int64(s.TreeSizes[k])})
	}
	for _, sz := range s.Shards {
		out.Shards = append(out.Shards, fromSize(sz))
	}
	return out
}

// ToStats converts a shard's stats from another host.
func ToStats(p *Stats) (*indexer.Stats, error) {
	tree, err := toRadixStats(p.GetTree())
	if err != nil {
		return nil, err
	}
	out := &indexer.Stats{Tree: tree, Size: toSize(p.GetSize()), TreeSizes: make(map[messages.WorkerKey]int, len(p.GetTreeSizes()))}
	for _, ts := range p.GetTreeSizes() {
		out.TreeSizes[toKey(ts.GetKey())] = int(ts.Size)
	}
	for _, sz := range p.GetShards() {
		out.Shards = append(out.Shards, toSize(sz))
	}
	return out, nil
}

// FromSnapshot converts a shard's snapshot for another host.
func FromSnapshot(s *indexer.Snapshot) *Snapshot {
	out := &Snapshot{Stats: fromRadixStats(s.Stats), Size: fromSize(s.Size)}
	for _, k := range sortedKeys(s.Blocks) {
		out.Blocks = append(out.Blocks, &StreamBlocks{Key: fromKey(k), Hashes: u64s(s.Blocks[k])})
	}
	return out
}

// ToSnapshot converts a shard's snapshot from another host.
func ToSnapshot(p *Snapshot) (*indexer.Snapshot, error) {
	st, err := toRadixStats(p.GetStats())
	if err != nil {
		return nil, err
	}
	out := &indexer.Snapshot{Stats: st, Size: toSize(p.GetSize()), Blocks: make(map[messages.WorkerKey][]messages.ExternalHash, len(p.GetBlocks()))}
	for _, sb := range p.GetBlocks() {
		out.Blocks[toKey(sb.GetKey())] = hashes[messages.ExternalHash](sb.GetHashes())
	}
	return out, nil
}

// FromDump converts a shard's dump for another host.
func FromDump(d *indexer.DumpResult) *DumpResult {
	out := &DumpResult{Events: FromEvents(d.Events)}
	for _, p := range d.Positions {
		out.Positions = append(out.Positions, fromPosition(p))
	}
	return out
}

// ToDump converts a shard's dump from another host.
func ToDump(p *DumpResult) (*indexer.DumpResult, error) {
	evs, err := ToEvents(p.GetEvents())
	if err != nil {
		return nil, err
	}
	out := &indexer.DumpResult{Events: evs}
	for _, pos := range p.GetPositions() {
		out.Positions = append(out.Positions, toPosition(pos))
	}
	return out, nil
}
