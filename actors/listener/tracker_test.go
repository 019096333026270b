package listener

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// trace renders actions compactly: "R0" replay from 0, "D3" deliver 3,
// "D3e1" deliver 3 of publisher incarnation 1, "X:start!" resync exact,
// "X:restart" resync degraded, "Z3:disconnected" drop now (marker at seq 3).
func trace(acts []Action) string {
	var parts []string
	for _, a := range acts {
		switch a.Kind {
		case Deliver:
			d := fmt.Sprintf("D%d", a.Seq)
			var epoch int
			if fmt.Sscanf(string(a.Payload), "%d/", &epoch); epoch > 0 {
				d += fmt.Sprintf("e%d", epoch) // a later publisher's batch
			}
			parts = append(parts, d)
		case RequestReplay:
			parts = append(parts, fmt.Sprintf("R%d", a.Seq))
		case Resync:
			s := "X:" + a.Reason.String()
			if a.Exact {
				s += "!"
			}
			if a.Keep {
				s += "+"
			}
			parts = append(parts, s)
		case Drop:
			parts = append(parts, fmt.Sprintf("Z%d:%s", a.Seq, a.Reason))
		}
	}
	return strings.Join(parts, " ")
}

// step is one input to a Tracker: live/replayed batch, end, timeout, start.
type step struct {
	kind  byte // 'L' live, 'P' replayed, 'E' end, 'T' timeout, 'S' start, 'V' recover, 'U' resubscribed
	seq   uint64
	epoch int // publisher incarnation (property test only)
}

func feed(t *Tracker, steps ...step) string {
	var acts []Action
	for _, s := range steps {
		switch s.kind {
		case 'S':
			acts = append(acts, t.Start()...)
		case 'L':
			acts = append(acts, t.Live(s.seq, seqPayload(s))...)
		case 'P':
			acts = append(acts, t.Replayed(s.seq, seqPayload(s))...)
		case 'E':
			acts = append(acts, t.ReplayEnd()...)
		case 'T':
			acts = append(acts, t.ReplayTimeout()...)
		case 'V':
			acts = append(acts, t.Recover()...)
		case 'U':
			acts = append(acts, t.Disconnected()...)
			acts = append(acts, t.Resubscribed()...)
		case 'u':
			acts = append(acts, t.Resubscribed()...)
		}
	}
	return trace(acts)
}

// seqPayload is a batch's payload: its publisher incarnation and seq.
func seqPayload(s step) []byte { return fmt.Appendf(nil, "%d/%d", s.epoch, s.seq) }

func L(s uint64) step { return step{kind: 'L', seq: s} }
func P(s uint64) step { return step{kind: 'P', seq: s} }

// Le and Pe are L and P of a later publisher incarnation.
func Le(s uint64, epoch int) step { return step{kind: 'L', seq: s, epoch: epoch} }
func Pe(s uint64, epoch int) step { return step{kind: 'P', seq: s, epoch: epoch} }

var (
	E  = step{kind: 'E'}
	T  = step{kind: 'T'}
	S  = step{kind: 'S'}
	V  = step{kind: 'V'}
	U  = step{kind: 'U'} // disconnected, then resubscribed
	Us = step{kind: 'u'} // resubscribed after silence
)

func TestTrackerScenarios(t *testing.T) {
	replay := TrackerConfig{Replay: true, SeqStartsAtZero: true}
	noReplay := TrackerConfig{SeqStartsAtZero: true}
	stamp := TrackerConfig{} // TensorRT-LLM: seq starts at a timestamp, no replay
	auto := TrackerConfig{DetectSeqStart: true}
	autoReplay := TrackerConfig{Replay: true, DetectSeqStart: true}
	cases := []struct {
		name  string
		cfg   TrackerConfig
		steps []step
		want  string
	}{
		{"in order from 0 is exact", noReplay, []step{L(0), L(1), L(2)}, "X:start! D0 D1 D2"},
		{"late start without replay is degraded", noReplay, []step{L(7), L(8)}, "X:start D7 D8"},
		{"gap without replay", noReplay, []step{L(0), L(1), L(4)}, "X:start! D0 D1 X:history_missing D4"},
		{"backwards is a restart", noReplay, []step{L(0), L(1), L(2), L(0), L(1)}, "X:start! D0 D1 D2 X:restart! D0 D1"},
		{"live copy of a replayed batch is no restart", replay, []step{L(0), L(3), P(0), P(1), P(2), P(3), P(4), E, L(4), L(5)}, "X:start! D0 R0 D1 D2 D3 D4 D5"},
		{"restart during a replay abandons it", replay, []step{L(0), L(5), L(0), L(1)}, "X:start! D0 R0 X:restart! D0 D1"},
		{"restart seen late", noReplay, []step{L(5), L(6), L(2)}, "X:start D5 D6 X:restart D2"},
		{"timestamp seqs: baseline, then gaps", stamp, []step{L(1e18), L(1e18 + 1), L(1e18 + 3)}, "X:start D1000000000000000000 D1000000000000000001 X:history_missing D1000000000000000003"},
		{"auto: a timestamp first seq is a baseline", auto, []step{L(1e18), L(1e18 + 1)}, "X:start D1000000000000000000 D1000000000000000001"},
		{"auto: a count from 0 is exact", auto, []step{L(0), L(1)}, "X:start! D0 D1"},
		{"auto: a late count asks for the start", autoReplay, []step{L(2), P(0), P(1), P(2), E, L(3)}, "R0 X:start! D0 D1 D2 D3"},
		{"auto: a timestamp first seq asks for nothing", autoReplay, []step{L(1e18 + 5), L(1e18 + 6)}, "X:start D1000000000000000005 D1000000000000000006"},

		{"startup replay of the whole history", replay, []step{S, P(0), P(1), L(2), E, L(3)}, "R0 X:start! D0 D1 D2 D3"},
		{"startup replay: buffer lost the start", replay, []step{S, P(4), P(5), E, L(6), P(5), E}, "R0 X:start D4 D5 R5 D6"},
		{"startup replay answered before the held batches: their gap is asked for again", replay,
			[]step{S, L(0), L(1), L(3), E, P(1), P(2), E}, "R0 X:start! D0 D1 R1 D2 D3"},
		{"startup replay empty, then live from 0", replay, []step{S, E, L(0), L(1)}, "R0 X:start! D0 D1"},
		{"startup: no replay answer (timeout)", replay, []step{S, L(3), L(4), T, L(5)}, "R0 X:start D3 D4 D5"},
		{"startup: live overlaps the replay", replay, []step{S, L(3), P(1), P(2), P(3), L(4), P(4), E}, "R0 X:start D1 D2 D3 D4"},
		{"gap filled by replay (from the last delivered batch, to verify it)", replay, []step{L(0), L(1), L(4), P(1), P(2), P(3), P(4), E, L(5)}, "X:start! D0 D1 R1 D2 D3 D4 D5"},
		{"gap: live batches held during replay", replay, []step{L(0), L(3), L(4), L(5), P(0), P(1), P(2), E, L(6)}, "X:start! D0 R0 D1 D2 D3 D4 D5 D6"},
		{"gap: history missing, rebuilt from the buffer", replay, []step{L(0), L(9), P(5), P(5), P(6), E, P(6), E},
			"X:start! D0 R0 Z0:history_missing R0 X:history_missing D5 D6 R6 X:history_missing D9"},
		{"a restart hidden by a gap is found by the verification", replay,
			[]step{L(0), L(1), Le(5, 1), Pe(1, 1), Pe(0, 1), Pe(1, 1), Pe(2, 1), Pe(3, 1), Pe(4, 1), Pe(5, 1), E},
			"X:start! D0 D1 R1 Z1:restart R0 X:restart! D0e1 D1e1 D2e1 D3e1 D4e1 D5e1"},
		{"history from the replay alone, then a late live copy: verified, it continues", replay,
			[]step{S, P(0), P(1), P(2), E, L(1), P(2), E, L(3)}, "R0 X:start! D0 D1 D2 R2 D3"},
		{"history from the replay alone, then a restarted publisher: found by the verification", replay,
			[]step{S, P(0), P(1), P(2), E, Le(0, 1), E, Pe(0, 1), E, Le(1, 1)},
			"R0 X:start! D0 D1 D2 R2 Z2:restart R0 X:restart! D0e1 D1e1"},
		{"history from the replay alone, then the next live batch: verified, it continues", replay,
			[]step{S, P(0), P(1), P(2), E, L(3), P(2), E, L(4)}, "R0 X:start! D0 D1 D2 R2 D3 D4"},
		{"history from the replay alone, then a restarted publisher continuing our seqs by coincidence: found by the verification", replay,
			[]step{S, P(0), P(1), P(2), E, Le(3, 1), Pe(2, 1), Pe(0, 1), Pe(1, 1), Pe(2, 1), Pe(3, 1), E, Le(4, 1)},
			"R0 X:start! D0 D1 D2 R2 Z2:restart R0 X:restart! D0e1 D1e1 D2e1 D3e1 D4e1"},
		{"recovery rebuilds from the buffer", replay, []step{L(0), L(1), L(2), V, P(0), P(1), P(2), E, L(3)},
			"X:start! D0 D1 D2 R0 X:recovery! D0 D1 D2 D3"},
		{"recovery without replay does nothing", noReplay, []step{L(0), L(1), V, L(2)}, "X:start! D0 D1 D2"},
		{"resubscribed: missed batches are replayed after verifying the last", replay,
			[]step{L(0), L(1), U, P(1), P(2), P(3), E, L(4)}, "X:start! D0 D1 R1 D2 D3 D4"},
		{"resubscribed: a restart continuing our seqs by coincidence is found", replay,
			[]step{L(0), L(1), U, Le(2, 1), Pe(1, 1), Pe(0, 1), Pe(1, 1), Pe(2, 1), E},
			"X:start! D0 D1 R1 Z1:restart R0 X:restart! D0e1 D1e1 D2e1"},
		{"disconnected without replay: the state is dropped at once", noReplay, []step{L(0), U, L(1), L(2)}, "X:start! D0 Z0:disconnected D1 D2"},
		{"disconnected without replay: a restart is then exact", noReplay, []step{L(3), U, L(0)}, "X:start D3 Z3:disconnected X:restart! D0"},
		{"disconnected without replay: dropped once until a batch comes", noReplay, []step{L(0), U, U, L(1), U}, "X:start! D0 Z0:disconnected D1 Z1:disconnected"},
		{"disconnected before any batch: nothing to drop", noReplay, []step{U, L(0)}, "X:start! D0"},
		{"resubscribed after silence without replay: an idle engine keeps its state", noReplay, []step{L(0), Us, L(1)}, "X:start! D0 D1"},
		{"gap opened during a replay is asked for again", replay, []step{L(0), L(2), P(0), P(1), L(4), E, P(2), P(3), E, L(5)}, "X:start! D0 R0 D1 D2 R2 D3 D4 D5"},
		{"gap: replay times out", replay, []step{L(0), L(3), L(4), T}, "X:start! D0 R0 Z0:replay_timeout X:replay_timeout D3 D4"},
		{"late answers after a timeout are ignored", replay, []step{L(0), L(3), T, P(1), P(2), E, L(4)}, "X:start! D0 R0 Z0:replay_timeout X:replay_timeout D3 D4"},
		{"first live batch after seq 0 asks for the start", replay, []step{L(2), P(0), P(1), P(2), E, L(3)}, "R0 X:start! D0 D1 D2 D3"},
		{"restart mid-stream with replay", replay, []step{L(0), L(1), L(1), L(2), P(0), P(1), P(2), E}, "X:start! D0 D1 R0 X:restart! D0 D1 D2"},
		{"duplicate replay answers dropped", replay, []step{L(0), L(3), P(0), P(1), P(1), P(2), P(3), E}, "X:start! D0 R0 D1 D2 D3"},
		{"reorder buffer overflow abandons the replay", TrackerConfig{Replay: true, SeqStartsAtZero: true, ReorderCap: 2},
			[]step{L(0), L(5), L(6), L(7), P(1)}, "X:start! D0 R0 X:reorder_overflow D5 D6 D7"},
		{"a previous publisher's batch arriving late is no part of the new one's history", replay,
			[]step{L(0), L(1), Le(0, 1), Le(1, 1), L(1), Pe(0, 1), Pe(1, 1), Pe(2, 1), E},
			"X:start! D0 D1 X:restart! D0e1 D1e1 R0 X:restart! D0e1 D1e1 D2e1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := feed(NewTracker(c.cfg), c.steps...); got != c.want {
				t.Errorf("\ngot  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestTrackerCountsGaps(t *testing.T) {
	replay := TrackerConfig{Replay: true, SeqStartsAtZero: true}
	noReplay := TrackerConfig{SeqStartsAtZero: true}
	for _, c := range []struct {
		name  string
		cfg   TrackerConfig
		steps []step
		want  uint64
	}{
		{"in order", noReplay, []step{L(0), L(1), L(2)}, 0},
		{"restart is no gap", noReplay, []step{L(0), L(1), L(0)}, 0},
		{"gaps without replay", noReplay, []step{L(0), L(2), L(5)}, 2},
		{"late first sight", noReplay, []step{L(7)}, 1},
		{"gap filled by replay", replay, []step{L(0), L(3), P(1), P(2), P(3), E, L(4)}, 1},
		{"live batches held during a replay are not gaps", replay, []step{L(0), L(3), L(5), P(1), P(2), E}, 1},
		{"timestamps: first sight is no gap", TrackerConfig{}, []step{L(1e18), L(1e18 + 2)}, 1},
	} {
		tr := NewTracker(c.cfg)
		feed(tr, c.steps...)
		if got := tr.Gaps(); got != c.want {
			t.Errorf("%s: Gaps() = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestTrackerProperties runs random publishers (restarting now and then)
// through a lossy subscription and a finite replay buffer, with replay
// answers racing live batches, and checks what the Tracker promises:
// between two resyncs, deliveries are consecutive and never repeated; an
// Exact resync is followed by seq 0; once everything in flight has arrived,
// the stream since the last resync holds only the current publisher's
// batches; and without loss or restarts nothing is ever resynced after the
// start.
func TestTrackerProperties(t *testing.T) {
	for seed := uint64(1); seed <= 500; seed++ {
		lossy := seed%4 != 0
		t.Run(fmt.Sprint(seed), func(t *testing.T) { trackerTrial(t, seed, lossy) })
	}
}

func trackerTrial(t *testing.T, seed uint64, lossy bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	bufferSize := uint64(rng.IntN(20) + 1)
	if !lossy {
		bufferSize = 1 << 20
	}
	tr := NewTracker(TrackerConfig{Replay: true, SeqStartsAtZero: true, ReorderCap: rng.IntN(30) + 1})
	if !lossy {
		tr = NewTracker(TrackerConfig{Replay: true, SeqStartsAtZero: true, ReorderCap: 1 << 20})
	}
	epoch, pub := 0, uint64(0) // current publisher and its next seq
	payload := func(e int, s uint64) []byte { return []byte(fmt.Sprintf("%d/%d", e, s)) }
	var live, answers []step // in flight, each in order
	var reqs []uint64
	segment := map[string]bool{} // payloads delivered since the last resync
	var segEpochs []int
	lastSeq, haveLast, expectExact, resyncs := uint64(0), false, false, 0
	check := func(acts []Action, what string) {
		defer func() {
			if !tr.Replaying() { // the owner discards the replay socket
				answers, reqs = nil, nil
			}
		}()
		for _, a := range acts {
			switch a.Kind {
			case RequestReplay:
				reqs = append(reqs, a.Seq)
			case Resync, Drop:
				resyncs++
				clear(segment)
				segEpochs = segEpochs[:0]
				haveLast, expectExact = false, a.Exact
			case Deliver:
				key := string(a.Payload)
				if segment[key] {
					t.Fatalf("%s: %s delivered twice since the last resync", what, key)
				}
				segment[key] = true
				var e int
				var sq uint64
				fmt.Sscanf(key, "%d/%d", &e, &sq)
				if sq != a.Seq {
					t.Fatalf("%s: payload %s delivered as seq %d", what, key, a.Seq)
				}
				segEpochs = append(segEpochs, e)
				if haveLast && a.Seq != lastSeq+1 {
					t.Fatalf("%s: delivered %d after %d without a resync", what, a.Seq, lastSeq)
				}
				if expectExact && a.Seq != 0 {
					t.Fatalf("%s: exact resync followed by seq %d", what, a.Seq)
				}
				expectExact, haveLast, lastSeq = false, true, a.Seq
			}
		}
	}
	serve := func() { // the replay endpoint answers the oldest request
		from := reqs[0]
		reqs = reqs[1:]
		oldest := uint64(0)
		if pub > bufferSize {
			oldest = pub - bufferSize
		}
		for s := max(from, oldest); s < pub; s++ {
			answers = append(answers, step{'P', s, epoch})
		}
		answers = append(answers, E)
	}
	answer := func() {
		s := answers[0]
		answers = answers[1:]
		if s.kind == 'P' {
			check(tr.Replayed(s.seq, payload(s.epoch, s.seq)), "replayed")
		} else {
			check(tr.ReplayEnd(), "end")
		}
	}
	check(tr.Start(), "start")
	for i := 0; i < 300; i++ {
		switch r := rng.IntN(100); {
		case r < 45: // publish
			if !lossy || rng.IntN(8) != 0 {
				live = append(live, step{'L', pub, epoch})
			}
			pub++
		case r < 47 && lossy: // restart: a new process with an empty replay buffer
			epoch, pub = epoch+1, 0
		case r < 75 && len(live) > 0:
			s := live[0]
			live = live[1:]
			check(tr.Live(s.seq, payload(s.epoch, s.seq)), "live")
		case r < 95 && len(answers) > 0:
			answer()
		case len(reqs) > 0:
			serve()
		case lossy && tr.Replaying() && rng.IntN(10) == 0:
			check(tr.ReplayTimeout(), "timeout")
		}
	}
	// Quiescence: everything in flight arrives, every replay completes, and
	// a last batch is published and received.
	live = append(live, step{'L', pub, epoch})
	for len(live) > 0 || len(answers) > 0 || len(reqs) > 0 {
		switch {
		case len(answers) > 0:
			answer()
		case len(reqs) > 0:
			serve()
		default:
			s := live[0]
			live = live[1:]
			check(tr.Live(s.seq, payload(s.epoch, s.seq)), "live")
		}
	}
	if tr.Replaying() {
		t.Fatal("still replaying after quiescence")
	}
	if len(segEpochs) == 0 || lastSeq != pub {
		t.Fatalf("the last published batch %d/%d was not delivered (last %d)", epoch, pub, lastSeq)
	}
	for _, e := range segEpochs {
		if e != epoch {
			t.Fatalf("after quiescence the stream holds batches of publisher %d, current is %d", e, epoch)
		}
	}
	if !lossy && resyncs != 1 {
		t.Fatalf("no loss, no restart: want only the start resync, got %d", resyncs)
	}
}

// TestTrackerResume covers a stream resumed at a position loaded from a
// peer's dump (last applied seq 10): "X:resumed+" is a keeping resync.
func TestTrackerResume(t *testing.T) {
	replay := TrackerConfig{Replay: true, SeqStartsAtZero: true}
	noReplay := TrackerConfig{SeqStartsAtZero: true}
	cases := []struct {
		name  string
		cfg   TrackerConfig
		exact bool
		steps []step
		want  string
	}{
		{"replay lines up: state kept", replay, true, []step{S, P(11), P(12), E, L(13)}, "R11 X:resumed!+ D11 D12 D13"},
		{"replay lines up, degraded peer", replay, false, []step{S, P(11), E, L(12)}, "R11 X:resumed+ D11 D12"},
		{"nothing newer yet: the next live batch continues", replay, true, []step{S, E, L(11)}, "R11 X:resumed!+ D11"},
		{"buffer moved on: state dropped", replay, true, []step{S, P(15), P(16), E}, "R11 X:history_missing D15 D16"},
		{"live during the replay is held", replay, true, []step{S, L(13), P(11), P(12), E}, "R11 X:resumed!+ D11 D12 D13"},
		{"a live seq at or below the position is a restart", replay, true, []step{S, E, L(0), L(1)}, "R11 X:restart! D0 D1"},
		{"without replay, the next live batch continues", noReplay, true, []step{S, L(11), L(12)}, "X:resumed!+ D11 D12"},
		{"without replay, a gap drops the state", noReplay, true, []step{S, L(14)}, "X:history_missing D14"},
		{"a live copy of a replayed batch is dropped", replay, true, []step{S, P(11), P(12), E, L(12), L(13)}, "R11 X:resumed!+ D11 D12 D13"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(tc.cfg)
			tr.Resume(10, tc.exact)
			if got := feed(tr, tc.steps...); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
