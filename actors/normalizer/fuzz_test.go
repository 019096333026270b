package normalizer

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// FuzzNormalize decodes and normalizes arbitrary payloads through one
// long-lived Normalizer (its learned state carries across inputs, as in a
// stream) and checks the outcome invariants.
func FuzzNormalize(f *testing.F) {
	for _, s := range wirefix.Seeds() {
		f.Add(s, uint8(0))
	}
	dec := wire.NewDecoder(wire.Limits{MaxEvents: 64, MaxHashes: 128, MaxTokens: 512, MaxStringBytes: 64, MaxExtraItems: 64}, nil)
	norm := New(Config{Worker: 1, MaxNamespaceBlocks: 256})
	f.Fuzz(func(t *testing.T, payload []byte, blockSize uint8) {
		norm.cfg.BlockSize = int(blockSize % 5)
		b, err := dec.Decode(payload)
		if err != nil {
			return
		}
		out := norm.Batch(b, nil)
		if len(out) != len(b.Events) {
			t.Fatalf("%d outcomes for %d events", len(out), len(b.Events))
		}
		for i, o := range out {
			ev := &b.Events[i]
			if !o.Accepted() {
				if o.Detail == "" || o.Reason >= messages.ReasonCount {
					t.Fatalf("event %d: reason %v without detail", i, o.Reason)
				}
				continue
			}
			if ev.Reason != messages.ReasonNone {
				t.Fatalf("event %d accepted although decoding rejected it (%v)", i, ev.Reason)
			}
			e := o.Event.Event
			switch e.Kind {
			case messages.KindStored:
				if len(e.Blocks) == 0 || len(e.Blocks) > len(ev.BlockHashes) {
					t.Fatalf("event %d: %d blocks from %d hashes", i, len(e.Blocks), len(ev.BlockHashes))
				}
				for j, blk := range e.Blocks {
					if uint64(blk.BlockHash) != ev.BlockHashes[j] {
						t.Fatalf("event %d block %d: engine hash changed", i, j)
					}
				}
			case messages.KindRemoved:
				if len(e.Removed) != len(ev.BlockHashes) {
					t.Fatalf("event %d: %d removed of %d", i, len(e.Removed), len(ev.BlockHashes))
				}
			case messages.KindOffloaded:
				if len(e.Offloaded) != len(ev.BlockHashes) || len(ev.Tokens) != 0 || o.Event.Placement.Tier == messages.TierDevice {
					t.Fatalf("event %d: bad offload %+v", i, o.Event)
				}
			case messages.KindCleared:
			default:
				t.Fatalf("event %d: accepted with kind %v", i, e.Kind)
			}
		}
		for _, rs := range norm.ranks {
			if len(rs.ns) > norm.cfg.MaxNamespaceBlocks {
				t.Fatalf("namespace map grew past its cap: %d", len(rs.ns))
			}
		}
	})
}
