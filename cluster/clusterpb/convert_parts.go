package clusterpb

import (
	"slices"

	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/messages"
)

// The small pieces convert.go is built from.

func fromKey(k messages.WorkerKey) *WorkerKey {
	return &WorkerKey{Worker: uint64(k.Worker), DpRank: uint32(k.DpRank)}
}

func toKey(p *WorkerKey) messages.WorkerKey {
	return messages.WorkerKey{Worker: messages.WorkerID(p.GetWorker()), DpRank: messages.DpRank(p.GetDpRank())}
}

// fromKeys converts stream keys for another host.
func fromKeys(ks []messages.WorkerKey) []*WorkerKey {
	if len(ks) == 0 {
		return nil
	}
	out := make([]*WorkerKey, len(ks))
	for i, k := range ks {
		out[i] = fromKey(k)
	}
	return out
}

func toKeys(ps []*WorkerKey) []messages.WorkerKey {
	if len(ps) == 0 {
		return nil
	}
	out := make([]messages.WorkerKey, len(ps))
	for i, p := range ps {
		out[i] = toKey(p)
	}
	return out
}

// sortedKeys gives map-valued fields a deterministic wire order.
func sortedKeys[V any](m map[messages.WorkerKey]V) []messages.WorkerKey {
	keys := make([]messages.WorkerKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b messages.WorkerKey) int {
		if a.Worker != b.Worker {
			return compare(a.Worker, b.Worker)
		}
		return compare(a.DpRank, b.DpRank)
	})
	return keys
}

func compare[T ~uint64 | ~uint32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func u64s[T ~uint64](s []T) []uint64 {
	if len(s) == 0 {
		return nil
	}
	out := make([]uint64, len(s))
	for i, v := range s {
		out[i] = uint64(v)
	}
	return out
}

func hashes[T ~uint64](s []uint64) []T {
	if len(s) == 0 {
		return nil
	}
	out := make([]T, len(s))
	for i, v := range s {
		out[i] = T(v)
	}
	return out
}

func bytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

func fromRadixStats(s radix.Stats) *RadixStats {
	out := &RadixStats{Events: s.Events}
	if s.Counts != [radix.ReasonCount]uint64{} {
		out.Counts = slices.Clone(s.Counts[:])
	}
	return out
}

func toRadixStats(p *RadixStats) (radix.Stats, error) {
	out := radix.Stats{Events: p.GetEvents()}
	if len(p.GetCounts()) > len(out.Counts) {
		return out, malformed("%d reason counts, at most %d", len(p.Counts), len(out.Counts))
	}
	copy(out.Counts[:], p.GetCounts())
	return out, nil
}

func fromSize(s radix.Size) *Size {
	return &Size{Blocks: int64(s.Blocks), Entries: int64(s.Entries), Detached: int64(s.Detached), Streams: int64(s.Streams)}
}

func toSize(p *Size) radix.Size {
	return radix.Size{Blocks: int(p.GetBlocks()), Entries: int(p.GetEntries()), Detached: int(p.GetDetached()), Streams: int(p.GetStreams())}
}

func fromPosition(p messages.Position) *Position {
	return &Position{Stream: fromKey(messages.WorkerKey(p.Stream)), Seq: p.Seq, Exact: p.Exact, Known: p.Known}
}

func toPosition(p *Position) messages.Position {
	return messages.Position{Stream: messages.StreamID(toKey(p.GetStream())), Seq: p.GetSeq(), Exact: p.GetExact(), Known: p.GetKnown()}
}

// FromKey converts a stream key for another host.
func FromKey(k messages.WorkerKey) *WorkerKey { return fromKey(k) }

// ToKey converts a stream key from another host (nil: the zero key).
func ToKey(p *WorkerKey) messages.WorkerKey { return toKey(p) }

// FromKeys converts stream keys for another host.
func FromKeys(ks []messages.WorkerKey) []*WorkerKey { return fromKeys(ks) }

// ToKeys converts stream keys from another host.
func ToKeys(ps []*WorkerKey) []messages.WorkerKey { return toKeys(ps) }
