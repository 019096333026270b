package radix

import "math/bits"

// Reach through the tiers: the prefix of a query a stream holds on device
// (Score.Reach[0]), on device or host (Reach[1]) and on any tier (Blocks).
// This is the cumulative per-tier match of the Mooncake KV-indexer RFC
// that Dynamo's /query and selection service report (gpu ≤ cpu ≤ disk): a
// block offloaded to host in the middle of a device prefix ends the device
// reach there, while the host reach goes on. Score.Tiers (by the fastest
// tier of each matched block) cannot give it: it counts blocks, not where
// the first gap is.
//
// A stream reaches depth i+1 on a tier set when it held depth i on it and
// holds block i there too; every holder of a matched block is scored (it
// holds block 0), so one pass over the matched path in order visits each
// (block, stream) entry once, as tiers does.

const (
	deviceBit = 1 << 0 // messages.TierDevice
	hostBit   = 1 << 1 // messages.TierHost
)

func (t *Tree) reach(out *Overlap) {
	t.fillSlots(out)
	visit := func(id uint32, b uint32, depth uint32) {
		sc := &out.Scores[out.slot[id]]
		if b&deviceBit != 0 && sc.Reach[0] == depth {
			sc.Reach[0] = depth + 1
		}
		if b&(deviceBit|hostBit) != 0 && sc.Reach[1] == depth {
			sc.Reach[1] = depth + 1
		}
	}
	for i, x := range out.path {
		depth := uint32(i)
		nd := t.node(x)
		switch nd.n {
		case 0:
		case 1:
			visit(nd.ent>>4, nd.ent&tierMask, depth)
		default:
			ws := &t.sets[nd.ent]
			if ws.bits == nil {
				for _, e := range ws.list {
					visit(e>>4, e&tierMask, depth)
				}
				continue
			}
			tb := ws.bits
			for k := range tb.any {
				var dev, host uint64
				if k < len(tb.tier[0]) {
					dev = tb.tier[0][k]
				}
				if k < len(tb.tier[1]) {
					host = tb.tier[1][k]
				}
				for w := dev | host; w != 0; w &= w - 1 {
					bit := w & -w
					var b uint32
					if dev&bit != 0 {
						b |= deviceBit
					}
					if host&bit != 0 {
						b |= hostBit
					}
					visit(uint32(k<<6+bits.TrailingZeros64(w)), b, depth)
				}
			}
		}
	}
}

// fillSlots maps each scored stream's interned id to its score's index.
func (t *Tree) fillSlots(out *Overlap) {
	if len(out.slot) < len(t.byID) {
		out.slot = make([]int32, len(t.byID))
	}
	for j, id := range out.ids {
		out.slot[id] = int32(j)
	}
}
