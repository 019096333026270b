package radix

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// An Offloaded event gives the tier to blocks the stream already holds; a
// later remove on the device keeps them on the host.
func TestOffloadedEventResolvesByEngineHash(t *testing.T) {
	tr := New(Config{})
	ev := func(id uint64, tier messages.StorageTier, e messages.KvCacheEvent) messages.RouterEvent {
		e.EventID, e.DpRank = id, 0
		return messages.RouterEvent{WorkerID: 3, StorageTier: tier, Event: e}
	}
	tr.Apply(ev(1, messages.TierDevice, messages.KvCacheEvent{Kind: messages.KindStored,
		Blocks: []messages.StoredBlock{{BlockHash: 1, TokensHash: 10}, {BlockHash: 2, TokensHash: 20}}}))
	o := tr.Apply(ev(0, messages.TierHost, messages.KvCacheEvent{Kind: messages.KindOffloaded, Offloaded: []messages.ExternalHash{1, 2, 99}}))
	if !o.Applied || tr.Stats().Counts[ReasonPlaceholderResolved] != 2 || tr.Stats().Counts[ReasonPlaceholderUnresolved] != 1 {
		t.Fatalf("outcome %+v stats %+v", o, tr.Stats())
	}
	tr.Apply(ev(2, messages.TierDevice, messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: []messages.ExternalHash{1, 2}}))
	got := tr.FindMatches([]messages.LocalHash{10, 20}, MatchOptions{Tiers: true}, nil)
	if len(got.Scores) != 1 || got.Scores[0].Blocks != 2 || got.Scores[0].Tiers[messages.TierHost] != 2 {
		t.Fatalf("after the device copy went, the host copy must match: %+v", got.Scores)
	}
}
