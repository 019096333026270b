package coalescer_test

import (
	"testing"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/messages"
)

func placed(tier messages.StorageTier, ev messages.KvCacheEvent) messages.PlacementEvent {
	return messages.PlacementEvent{Placement: messages.Placement{Worker: messages.WorkerKey{Worker: 1}, Tier: tier}, Event: ev}
}

// An offload placeholder is emitted alone, in order (after the pending
// event), without an event id, and counts as a store on its tier for the
// removes that follow.
func TestOffloadIsEmittedAloneWithoutAnID(t *testing.T) {
	s := coalescer.New(messages.WorkerKey{Worker: 1}, coalescer.Config{})
	var out []messages.RouterEvent
	out = s.Push(placed(messages.TierDevice, messages.KvCacheEvent{Kind: messages.KindStored,
		Blocks: []messages.StoredBlock{{BlockHash: 1, TokensHash: 10}, {BlockHash: 2, TokensHash: 20}}}), out)
	out = s.Push(placed(messages.TierHost, messages.KvCacheEvent{Kind: messages.KindOffloaded, Offloaded: []messages.ExternalHash{1, 2}}), out)
	if len(out) != 2 || out[0].Event.Kind != messages.KindStored || out[0].Event.EventID != 1 ||
		out[1].Event.Kind != messages.KindOffloaded || out[1].Event.EventID != 0 || out[1].StorageTier != messages.TierHost ||
		len(out[1].Event.Offloaded) != 2 {
		t.Fatalf("got %+v", out)
	}
	out = s.Push(placed(messages.TierHost, messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: []messages.ExternalHash{1}}), out[:0])
	out = s.Flush(out)
	if len(out) != 1 || out[0].Event.Kind != messages.KindRemoved || out[0].Event.EventID != 2 {
		t.Fatalf("the host copy's remove must pass with the next id: %+v", out)
	}
	if s.LastEventID() != 2 {
		t.Errorf("last id %d, want 2 (the offload takes none)", s.LastEventID())
	}
}
