package radix

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// Reach is the prefix held through the fast tiers, cut at the first block
// missing there; Blocks stays the reach through every tier. Checked with a
// few streams (inline and list nodes) and with many (bitset nodes).
func TestFindMatchesReach(t *testing.T) {
	for _, streams := range []int{3, 300} {
		t.Run(fmt.Sprint(streams, " streams"), func(t *testing.T) {
			tr := New(Config{})
			for s := range streams {
				w := messages.WorkerID(s + 1)
				ev := func(id uint64, tier messages.StorageTier, e messages.KvCacheEvent) {
					e.EventID = id
					tr.Apply(messages.RouterEvent{WorkerID: w, StorageTier: tier, Event: e})
				}
				ev(1, messages.TierDevice, messages.KvCacheEvent{Kind: messages.KindStored, Blocks: []messages.StoredBlock{
					{BlockHash: 1, TokensHash: 10}, {BlockHash: 2, TokensHash: 20}, {BlockHash: 3, TokensHash: 30}, {BlockHash: 4, TokensHash: 40}}})
				switch s % 3 {
				case 1: // block 1 moved to host: the device reach ends at it, the host reach goes on
					ev(2, messages.TierHost, messages.KvCacheEvent{Kind: messages.KindOffloaded, Offloaded: []messages.ExternalHash{2}})
					ev(3, messages.TierDevice, messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: []messages.ExternalHash{2}})
				case 2: // block 0 moved to disk: nothing on the fast tiers from block 0
					ev(2, messages.TierDisk, messages.KvCacheEvent{Kind: messages.KindOffloaded, Offloaded: []messages.ExternalHash{1}})
					ev(3, messages.TierDevice, messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: []messages.ExternalHash{1}})
				}
			}
			got := tr.FindMatches([]messages.LocalHash{10, 20, 30, 40, 50}, MatchOptions{Reach: true}, nil)
			if len(got.Scores) != streams {
				t.Fatalf("%d scores, want %d", len(got.Scores), streams)
			}
			want := [3][2]uint32{{4, 4}, {1, 4}, {0, 0}}
			for _, sc := range got.Scores {
				s := int(sc.Key.Worker) - 1
				if sc.Blocks != 4 || sc.Reach != want[s%3] {
					t.Errorf("worker %d: blocks %d reach %v, want 4 %v", sc.Key.Worker, sc.Blocks, sc.Reach, want[s%3])
				}
			}
		})
	}
}
