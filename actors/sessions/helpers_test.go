package sessions

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

var t0 = time.Unix(1_700_000_000, 0)

func wk(w uint64, r uint32) messages.WorkerKey {
	return messages.WorkerKey{Worker: messages.WorkerID(w), DpRank: messages.DpRank(r)}
}

const noParent = -1

// st is a device-tier Stored event of session sess on (w, r): hashes
// chained under parent (noParent: a root chain).
func st(w uint64, r uint32, sess string, parent int64, hashes ...uint64) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: messages.WorkerID(w), SessionID: sess,
		Event: messages.KvCacheEvent{Kind: messages.KindStored, DpRank: messages.DpRank(r)}}
	if parent >= 0 {
		ev.Event.HasParent, ev.Event.ParentHash = true, messages.ExternalHash(parent)
	}
	for _, h := range hashes {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{BlockHash: messages.ExternalHash(h), TokensHash: messages.LocalHash(h * 7)})
	}
	return ev
}

func rm(w uint64, r uint32, hashes ...uint64) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: messages.WorkerID(w),
		Event: messages.KvCacheEvent{Kind: messages.KindRemoved, DpRank: messages.DpRank(r)}}
	for _, h := range hashes {
		ev.Event.Removed = append(ev.Event.Removed, messages.ExternalHash(h))
	}
	return ev
}

func offl(w uint64, r uint32, hashes ...uint64) messages.RouterEvent {
	ev := messages.RouterEvent{WorkerID: messages.WorkerID(w),
		Event: messages.KvCacheEvent{Kind: messages.KindOffloaded, DpRank: messages.DpRank(r)}}
	for _, h := range hashes {
		ev.Event.Offloaded = append(ev.Event.Offloaded, messages.ExternalHash(h))
	}
	return ev
}

func clr(w uint64, r uint32) messages.RouterEvent {
	return messages.RouterEvent{WorkerID: messages.WorkerID(w),
		Event: messages.KvCacheEvent{Kind: messages.KindCleared, DpRank: messages.DpRank(r)}}
}

func onTier(ev messages.RouterEvent, t messages.StorageTier) messages.RouterEvent {
	ev.StorageTier = t
	return ev
}

// hs is the comparable part of a Holder.
type hs struct {
	key    messages.WorkerKey
	depth  uint32
	blocks int
	newest messages.ExternalHash
}

func (h hs) String() string {
	return fmt.Sprintf("{w%d/r%d depth %d blocks %d newest %d}", h.key.Worker, h.key.DpRank, h.depth, h.blocks, h.newest)
}

func summary(hl []Holder) []hs {
	out := make([]hs, len(hl))
	for i, h := range hl {
		out[i] = hs{h.Key, h.Depth, h.Blocks, h.Newest}
	}
	return out
}

// checkInvariants verifies the index's internal consistency: every live
// block is in its lineage's map and its stream's owners and nowhere else,
// parents precede children and are live, depths and anchors follow the
// parents, the last block is live, the gauges add up, the LRU list holds
// exactly the sessions.
func checkInvariants(t testing.TB, x *Index) {
	t.Helper()
	blocks, lineages := 0, 0
	owned := map[messages.WorkerKey]map[messages.ExternalHash]int{}
	for id, s := range x.sessions {
		if s.id != id || len(s.lins) == 0 || len(s.lins) > x.cfg.MaxHolders {
			t.Fatalf("session %q: id %q, %d lineages", id, s.id, len(s.lins))
		}
		keys := map[messages.WorkerKey]bool{}
		for _, l := range s.lins {
			lineages++
			if keys[l.key] {
				t.Fatalf("session %q: two lineages on %v", id, l.key)
			}
			keys[l.key] = true
			if l.sess != s || x.streams[l.key] != l.st {
				t.Fatalf("session %q: lineage on %v not linked", id, l.key)
			}
			if int(l.id) >= len(l.st.lins) || l.st.lins[l.id] != l {
				t.Fatalf("session %q: lineage on %v not in its stream", id, l.key)
			}
			live, dead := 0, 0
			for i, b := range l.blocks {
				if b.dead {
					dead++
					continue
				}
				live++
				if p, ok := l.lookup(b.hash); !ok || int(p) != i {
					t.Fatalf("session %q %v: block %d (%d) idx %d %v", id, l.key, i, b.hash, p, ok)
				}
				if b.tiers == 0 {
					t.Fatalf("session %q %v: block %d on no tier", id, l.key, i)
				}
				if pp := l.parent(int32(i)); pp >= 0 {
					p := l.blocks[pp]
					if int(pp) >= i || p.dead || b.anchor != p.anchor || b.hasAnchor != p.hasAnchor {
						t.Fatalf("session %q %v: block %d parent %d %+v vs %+v", id, l.key, i, pp, b, p)
					}
				}
				if owned[l.key] == nil {
					owned[l.key] = map[messages.ExternalHash]int{}
				}
				owned[l.key][b.hash]++
			}
			if live != l.live || dead != l.dead || live == 0 || l.blocks[len(l.blocks)-1].dead {
				t.Fatalf("session %q %v: live %d/%d dead %d/%d", id, l.key, live, l.live, dead, l.dead)
			}
			if n := int32(len(l.blocks)); n > 0 && l.depth != l.chainLen(n-1) {
				t.Fatalf("session %q %v: newest's depth %d, chain %d", id, l.key, l.depth, l.chainLen(n-1))
			}
			if l.dirtyFrom != -1 {
				t.Fatalf("session %q %v: dirtyFrom %d", id, l.key, l.dirtyFrom)
			}
			blocks += live
		}
	}
	if blocks != x.blocks || lineages != x.lineages {
		t.Fatalf("gauges: blocks %d/%d lineages %d/%d", blocks, x.blocks, lineages, x.lineages)
	}
	for key, st := range x.streams {
		if held := len(st.lins) - len(st.free); st.key != key || st.n == 0 || held != st.n {
			t.Fatalf("stream %v: key %v, %d lineages (%d ids held)", key, st.key, st.n, held)
		}
		n := 0
		for h := range st.more {
			if _, ok := st.owner[h]; !ok || len(st.more[h]) == 0 {
				t.Fatalf("stream %v hash %d: %d more holders, owner %v", key, h, len(st.more[h]), ok)
			}
		}
		for h := range st.owner {
			all := st.holders(h, nil)
			if len(all) != owned[key][h] {
				t.Fatalf("stream %v hash %d: %d owners, %d holders", key, h, len(all), owned[key][h])
			}
			for _, l := range all {
				if _, ok := l.lookup(h); !ok || l.key != key {
					t.Fatalf("stream %v hash %d: owner does not hold it", key, h)
				}
			}
			n++
		}
		if n != len(owned[key]) {
			t.Fatalf("stream %v: %d owned hashes, %d held", key, n, len(owned[key]))
		}
	}
	n := 0
	var prev *session
	for s := x.head; s != nil; s = s.next {
		if s.prev != prev || x.sessions[s.id] != s {
			t.Fatalf("LRU: broken at %q", s.id)
		}
		prev = s
		n++
	}
	if n != len(x.sessions) || x.tail != prev {
		t.Fatalf("LRU: %d listed, %d sessions", n, len(x.sessions))
	}
}
