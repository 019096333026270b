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
// block is found at its position through its stream's owner slots and no
// slot names anything else, the runs cut the blocks into chains whose
// parents precede them and are live, depths follow the parents, the last
// block is live, the gauges add up, the LRU list holds exactly the
// sessions.
func checkInvariants(t testing.TB, x *Index) {
	t.Helper()
	blocks, lineages := 0, 0
	owned := map[messages.WorkerKey]int{}
	for s := range x.sessions.all() {
		id := s.id
		if x.sessions.get(id) != s || len(s.lins) == 0 || len(s.lins) > x.cfg.MaxHolders {
			t.Fatalf("session %q: not found by its id, or %d lineages", id, len(s.lins))
		}
		keys := map[messages.WorkerKey]bool{}
		for _, l := range s.lins {
			lineages++
			if keys[l.st.key] {
				t.Fatalf("session %q: two lineages on %v", id, l.st.key)
			}
			keys[l.st.key] = true
			if l.sess != s || x.streams[l.st.key] != l.st {
				t.Fatalf("session %q: lineage on %v not linked", id, l.st.key)
			}
			if int(l.id) >= len(l.st.lins) || l.st.lins[l.id] != l {
				t.Fatalf("session %q: lineage on %v not in its stream", id, l.st.key)
			}
			if len(l.hashes) > int(l.tierAt) || len(l.runs) == 0 || l.runs[0].start != 0 {
				t.Fatalf("session %q %v: %d hashes, room for %d, runs %+v", id, l.st.key, len(l.hashes), l.tierAt, l.runs)
			}
			for i, r := range l.runs {
				if r.parent >= r.start || (i > 0 && r.start <= l.runs[i-1].start) || int(r.start) >= len(l.hashes) || r.parent < anchored {
					t.Fatalf("session %q %v: runs %+v", id, l.st.key, l.runs)
				}
			}
			live, dead := 0, 0
			for i, h := range l.hashes {
				if l.tier(int32(i)) == 0 {
					dead++
					continue
				}
				live++
				if p, ok := l.lookup(h); !ok || int(p) != i {
					t.Fatalf("session %q %v: block %d (%d) found at %d %v", id, l.st.key, i, h, p, ok)
				}
				if pp := l.parent(int32(i)); pp >= 0 && (int(pp) >= i || l.tier(pp) == 0) {
					t.Fatalf("session %q %v: block %d parent %d (tiers %b)", id, l.st.key, i, pp, l.tier(pp))
				}
				owned[l.st.key]++
			}
			if live != int(l.live) || dead != int(l.dead) || live == 0 || l.tier(int32(len(l.hashes)-1)) == 0 {
				t.Fatalf("session %q %v: live %d/%d dead %d/%d", id, l.st.key, live, l.live, dead, l.dead)
			}
			if n := int32(len(l.hashes)); l.depth != l.chainLen(n-1) {
				t.Fatalf("session %q %v: newest's depth %d, chain %d", id, l.st.key, l.depth, l.chainLen(n-1))
			}
			if l.dirtyFrom != -1 {
				t.Fatalf("session %q %v: dirtyFrom %d", id, l.st.key, l.dirtyFrom)
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
		o := &st.owners
		live, tombs := 0, 0
		if len(o.slots) != o.size*slotBytes+2 {
			t.Fatalf("stream %v: %d slot bytes for %d slots", key, len(o.slots), o.size)
		}
		for i := range o.size {
			sl := o.slot(i)
			switch {
			case sl == 0:
				continue
			case sl == tomb:
				tombs++
				continue
			}
			live++
			l := st.lins[slotLin(sl)]
			if l == nil {
				t.Fatalf("stream %v: slot %#x names a free lineage", key, sl)
			}
			idx := relPos(l, slotPos(sl))
			if int(idx) >= len(l.hashes) || l.tier(idx) == 0 || slotOf(o.mix(l.hashes[idx]), l.id, slotPos(sl)) != sl {
				t.Fatalf("stream %v: slot %#x names no live block of its lineage", key, sl)
			}
		}
		if live != o.n || tombs != o.tomb || live != owned[key] || 8*(o.n+o.tomb) > 7*o.size {
			t.Fatalf("stream %v: %d live slots (n %d), %d tombstones (%d), %d blocks held, %d slots", key, live, o.n, tombs, o.tomb, owned[key], o.size)
		}
	}
	n := 0
	var prev *session
	for s := x.head; s != nil; s = s.next {
		if s.prev != prev || x.sessions.get(s.id) != s {
			t.Fatalf("LRU: broken at %q", s.id)
		}
		prev = s
		n++
	}
	if n != x.sessions.len() || x.tail != prev {
		t.Fatalf("LRU: %d listed, %d sessions", n, x.sessions.len())
	}
}
