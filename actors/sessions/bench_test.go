package sessions

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
)

// benchDriver generates multi-turn traffic: sessions spread over workers,
// each turn a Stored chain continuing the session's newest block on its
// worker, and (evict) the engine evicting the blocks stored `window`
// turns earlier. Event slices are reused: Apply does not retain them.
type benchDriver struct {
	sessions, workers, blocks int
	ids                       []string
	tip                       []uint64   // per session: newest hash (0: none)
	hist                      [][]uint64 // per session: first hash of its recent turns
	next                      uint64
	track                     bool // remember turns for evict
	ev, rmev                  messages.RouterEvent
}

func newBenchDriver(sessions, workers, blocks int) *benchDriver {
	d := &benchDriver{sessions: sessions, workers: workers, blocks: blocks,
		ids: make([]string, sessions), tip: make([]uint64, sessions), hist: make([][]uint64, sessions), next: 1}
	for i := range d.ids {
		d.ids[i] = fmt.Sprintf("conv-%08d", i)
	}
	d.ev.Event = messages.KvCacheEvent{Kind: messages.KindStored, Blocks: make([]messages.StoredBlock, blocks)}
	d.rmev.Event = messages.KvCacheEvent{Kind: messages.KindRemoved, Removed: make([]messages.ExternalHash, blocks)}
	return d
}

// turn returns session s's next Stored event (attributed or not).
func (d *benchDriver) turn(s int, attributed bool) *messages.RouterEvent {
	ev := &d.ev
	ev.WorkerID = messages.WorkerID(s % d.workers)
	ev.SessionID = ""
	if attributed {
		ev.SessionID = d.ids[s]
	}
	ev.Event.HasParent, ev.Event.ParentHash = d.tip[s] != 0, messages.ExternalHash(d.tip[s])
	first := d.next
	for i := range ev.Event.Blocks {
		ev.Event.Blocks[i] = messages.StoredBlock{BlockHash: messages.ExternalHash(d.next), TokensHash: messages.LocalHash(d.next)}
		d.next++
	}
	d.tip[s] = d.next - 1
	if d.track {
		d.hist[s] = append(d.hist[s], first)
	}
	return ev
}

// evict returns the Removed event for session s's oldest remembered turn
// (its blocks, tail first as engines evict) once it has more than window.
func (d *benchDriver) evict(s, window int) *messages.RouterEvent {
	if len(d.hist[s]) <= window {
		return nil
	}
	first := d.hist[s][0]
	d.hist[s] = d.hist[s][1:]
	ev := &d.rmev
	ev.WorkerID = messages.WorkerID(s % d.workers)
	for i := range ev.Event.Removed {
		ev.Event.Removed[i] = messages.ExternalHash(first + uint64(len(ev.Event.Removed)-1-i))
	}
	return ev
}

// BenchmarkApply: one op is one 16-block Stored event (plus, for evict,
// the Removed event of the same session's turn 8 turns earlier, tail
// first: a prefix eviction, so it cascades through the later turns and the
// next turn starts a new segment — the remove, cascade, compaction and
// lineage re-creation paths).
func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name       string
		sessions   int
		attributed bool
		evict      int // 0: no removes
		cfg        Config
	}{
		{"unattributed", 1024, false, 0, Config{}},
		{"store/1k-sessions", 1024, true, 0, Config{MaxDepth: 256}},
		{"store/64k-sessions-lru", 1 << 16, true, 0, Config{MaxSessions: 1 << 14, MaxDepth: 256}},
		{"store+evict/1k-sessions", 1024, true, 8, Config{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := newBenchDriver(bc.sessions, 8, 16)
			d.track = bc.evict > 0
			x := New(bc.cfg)
			now := t0
			// Warm up: every session a few turns.
			for s := 0; s < bc.sessions*4; s++ {
				x.Apply(*d.turn(s%bc.sessions, bc.attributed), now)
				if bc.evict > 0 {
					if ev := d.evict(s%bc.sessions, bc.evict); ev != nil {
						x.Apply(*ev, now)
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := i % bc.sessions
				now = now.Add(time.Microsecond)
				x.Apply(*d.turn(s, bc.attributed), now)
				if bc.evict > 0 {
					if ev := d.evict(s, bc.evict); ev != nil {
						x.Apply(*ev, now)
					}
				}
			}
			b.StopTimer()
			st := x.Stats()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*16), "ns/block")
			b.ReportMetric(float64(st.Blocks), "held-blocks")
		})
	}
}

func BenchmarkCredit(b *testing.B) {
	d := newBenchDriver(1024, 64, 16)
	x := New(Config{})
	for s := 0; s < 1024*4; s++ {
		x.Apply(*d.turn(s%1024, true), t0)
	}
	c := make([]routing.Candidate, 64)
	for i := range c {
		c[i].Key = wk(uint64(i), 0)
	}
	ov := []routing.Overlap{{Key: c[3].Key, Blocks: 40}, {Key: c[7].Key, Blocks: 12}}
	var bonus []Bonus
	var out []routing.Overlap
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bonus = x.Credit(d.ids[i%1024], 1, c, bonus[:0])
		out = Combine(ov, bonus, 64, out[:0])
	}
}
