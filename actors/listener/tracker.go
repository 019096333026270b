package listener

import (
	"cmp"
	"slices"

	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/zeebo/xxh3"
)

// ResyncReason says why a stream's index state had to be dropped.
type ResyncReason uint8

// Resync reasons (metrics labels).
const (
	ResyncNone            ResyncReason = iota
	ResyncStart                        // first sight of the stream
	ResyncRestart                      // seq went backwards: the publisher restarted
	ResyncHistoryMissing               // a gap the replay buffer could not fill
	ResyncReplayTimeout                // the replay endpoint did not finish in time
	ResyncReorderOverflow              // too many live batches arrived during a replay
	ResyncResumed                      // continues a position loaded from a peer (keeps the state)
	ResyncRecovery                     // rebuilt from the replay buffer after a batch the pipeline could not apply
	ResyncDisconnected                 // the connection broke and there is no replay endpoint to verify continuity
)

var resyncNames = [...]string{"", "start", "restart", "history_missing", "replay_timeout", "reorder_overflow", "resumed", "recovery", "disconnected"}

// String returns the reason's label.
func (r ResyncReason) String() string {
	if int(r) < len(resyncNames) {
		return resyncNames[r]
	}
	return "invalid"
}

// ActionKind is what the Tracker asks its owner to do.
type ActionKind uint8

// Action kinds.
const (
	// Deliver: pass Seq/Payload downstream, in this order.
	Deliver ActionKind = iota + 1
	// RequestReplay: ask the engine's replay endpoint for every batch with
	// seq ≥ Seq (and arm the replay timeout).
	RequestReplay
	// Resync: drop what the index holds for this stream before the next
	// delivered batch. Exact says whether the stream is complete from there
	// (the engine's cache was empty: a fresh publisher) or degraded (history
	// before the next batch is unknown). With Keep (ResyncResumed) nothing is
	// dropped: the stream continues the state loaded at Tracker.Resume, and
	// Exact is that state's.
	Resync
	// Drop: drop what the index holds for this stream now, without waiting
	// for a batch (the owner sends a marker carrying only the resync, at
	// Seq, the last delivered seq); the stream is degraded from there.
	Drop
)

// Action is one instruction from the Tracker.
type Action struct {
	Kind    ActionKind
	Seq     uint64
	Payload []byte
	Reason  ResyncReason
	Exact   bool
	Keep    bool
	// Live says a delivered batch came from the subscription (Live, or
	// held during a replay), not from the replay endpoint.
	Live bool
}

// TrackerConfig configures one stream's Tracker.
type TrackerConfig struct {
	// Replay: the engine has a replay endpoint.
	Replay bool
	// SeqStartsAtZero: a fresh publisher's first seq is 0 (vLLM, SGLang).
	SeqStartsAtZero bool
	// DetectSeqStart (engine auto): each publisher's first seq says —
	// a nanosecond timestamp (engine.IsTimestampSeq) is a baseline, a
	// smaller seq counts from 0. SeqStartsAtZero is then ignored.
	DetectSeqStart bool
	// ReorderCap bounds the live batches buffered while a replay runs
	// (default 1024, as the reference).
	ReorderCap int
}

// Tracker follows one publisher's sequence numbers: it delivers batches in
// order exactly once, asks for replays to fill gaps, and says when the
// stream's index state must be dropped. It is a pure state machine: the
// owner feeds it what the sockets and timers produce and carries out the
// Actions it returns, in order.
//
// Every Deliver is preceded, since the last Resync, by the delivery of every
// earlier batch of that publisher; a Resync with Exact set means the history
// is complete from the publisher's first batch (so from an empty cache).
type Tracker struct {
	cfg       TrackerConfig
	started   bool   // next is a position in the publisher's sequence
	next      uint64 // next seq to deliver
	firstWhy  ResyncReason
	lastLive  uint64 // last seq seen on the subscription (live order is the publisher's)
	haveLive  bool
	replaying bool
	// replayGot counts batches the running replay delivered; retries the
	// replays asked again in a row for gaps that opened during a replay.
	// replayFresh: the running replay began with no delivered history (at
	// start, or starting over) — one that delivers nothing may just have
	// been answered before the engine published the held batches.
	replayGot, retries int
	replayFresh        bool
	buffered           []pending // live batches held during a replay, ascending seq
	gaps               uint64
	// resumed: started at a loaded position (Resume) and nothing delivered
	// since; resumeExact is that position's state.
	resumed, resumeExact bool
	// lastHash is the hash of the last delivered payload (hashKnown: one
	// was delivered since the start); verifying: the running replay starts
	// at that batch, to check the publisher still has it.
	lastHash             uint64
	hashKnown, verifying bool
	// belowHistory: the running verification was asked for by the first
	// live batch heard, whose seq was under a history delivered by replay
	// alone — a late live copy, or a restarted publisher's new seqs (a
	// failed verification then names a restart).
	belowHistory bool
	// dropped: a Drop was returned and nothing delivered since.
	dropped bool
}

// maxReplayRetries bounds back-to-back replays for gaps that opened while a
// replay ran.
const maxReplayRetries = 3

type pending struct {
	seq     uint64
	payload []byte
}

// NewTracker returns a Tracker for a stream not yet seen.
func NewTracker(cfg TrackerConfig) *Tracker {
	if cfg.ReorderCap <= 0 {
		cfg.ReorderCap = 1024
	}
	return &Tracker{cfg: cfg, firstWhy: ResyncStart}
}

// Replaying reports whether a replay is running (the stream is recovering).
// When it turns false the owner must discard the replay socket: answers to a
// finished or abandoned replay must never be fed to Replayed.
func (t *Tracker) Replaying() bool { return t.replaying }

// Next returns the next seq the Tracker expects, and whether it knows it.
func (t *Tracker) Next() (uint64, bool) { return t.next, t.started }

// Held is the number of live batches held while a replay runs.
func (t *Tracker) Held() int { return len(t.buffered) }

// Gaps counts live batches, outside a replay, that skipped ahead of the
// next expected seq (for a fresh stream of an engine whose seqs start at 0:
// a first seq above 0), whether a replay then filled the gap or not.
func (t *Tracker) Gaps() uint64 { return t.gaps }

// Resume starts a Tracker not yet started at a position loaded from a
// peer's dump (kvrouter serve --bootstrap-from): the index holds the
// stream's state up to and including batch seq, exact or not. Start then
// asks the replay for the batches after seq. If the first batch delivered
// continues at seq+1 it carries a keeping Resync (ResyncResumed) instead of
// a dropping one; a gap drops the state as usual. A live seq ≤ seq is a
// publisher restart: every batch published after the dump was taken has a
// higher seq.
func (t *Tracker) Resume(seq uint64, exact bool) {
	t.started, t.next = true, seq+1
	t.lastLive, t.haveLive = seq, true
	t.resumed, t.resumeExact = true, exact
}

// Start is called once the subscription is in place: with a replay
// endpoint, ask it for everything it still holds (after the resumed
// position, if any), so a router started after the engine learns what the
// buffer has.
func (t *Tracker) Start() []Action {
	if !t.cfg.Replay {
		return nil
	}
	if t.started {
		return t.replay(nil, t.next)
	}
	return t.replay(nil, 0)
}

// Resubscribed is called when the subscription is in place again (a new
// socket): batches published meanwhile were missed, and the publisher may
// have restarted unseen — its new seqs can continue ours by coincidence.
// With a replay endpoint and a delivered history, it asks for everything
// after the last delivered batch, verifying that batch first (Replayed).
// Without one, Disconnected already dropped the state if the connection
// broke; a socket recreated after mere silence kept a live connection to
// the same publisher until then.
func (t *Tracker) Resubscribed() []Action {
	if !t.started || t.replaying || !t.cfg.Replay {
		return nil
	}
	return t.replay(nil, t.next)
}

// Disconnected is called when the subscription's connection broke (an
// error, not a socket recreated after silence). Without a replay endpoint
// continuity cannot be checked once it is back: the publisher may restart
// meanwhile and its new seqs continue ours by coincidence. So the stream's
// state is dropped at once (Drop), not at its next batch — an engine that
// restarted and stays idle sends none, and its old blocks would be
// phantoms all that time. With a replay endpoint, Resubscribed verifies the
// history instead.
func (t *Tracker) Disconnected() []Action {
	if t.cfg.Replay {
		return nil
	}
	return t.drop(ResyncDisconnected)
}

// Recover drops the delivered history and asks the replay endpoint for
// everything it holds, as at start, so the stream is rebuilt from the
// buffer (exact if it still holds the publisher's first batch). The owner
// calls it when the pipeline could not apply a delivered batch: a copy
// damaged on the way is read again. Without a replay endpoint the stream
// stays as it is (its state was dropped and flagged degraded downstream).
func (t *Tracker) Recover() []Action {
	if !t.cfg.Replay {
		return nil
	}
	t.started, t.firstWhy, t.resumed, t.hashKnown = false, ResyncRecovery, false, false
	t.buffered = nil
	return t.replay(nil, 0)
}

// Live handles a batch received on the subscription. Live seqs only grow
// within one publisher's life, so a seq not above the last live one means
// the publisher restarted — while a seq below the next expected one but above
// the last live one is merely a live copy of a batch a replay already
// delivered.
func (t *Tracker) Live(seq uint64, payload []byte) []Action {
	restart := t.haveLive && seq <= t.lastLive
	// A history learned from the replay alone (no live batch heard yet, the
	// subscription joined late) gives no last live seq to compare with: a
	// seq under it is a late copy or a restarted publisher's, and one that
	// continues it may be a restarted publisher's too.
	unverified := !t.haveLive && t.started && seq <= t.next
	t.lastLive, t.haveLive = seq, true
	if restart {
		// The old publisher's cache went with it: whatever is held or
		// being replayed is moot.
		t.started, t.firstWhy, t.resumed = false, ResyncRestart, false
		t.replaying, t.buffered = false, nil
	}
	if t.replaying {
		return t.hold(seq, payload)
	}
	if unverified && seq == t.next && t.cfg.Replay && t.hashKnown {
		// The first live batch continues a history learned from the
		// replay alone — or a publisher that restarted since the replay
		// answered has published as many batches as the replay held, and
		// its new seqs continue ours by coincidence (the subscription
		// joined late on a busy host). Verify the last delivered batch
		// before placing this one (held until the replay ends).
		return t.hold(seq, payload, t.replay(nil, t.next)...)
	}
	if t.started && seq < t.next {
		if unverified && t.cfg.Replay && t.hashKnown {
			// Ask whether the publisher still has the last delivered batch.
			acts := t.replay(nil, t.next)
			t.belowHistory = t.verifying
			return acts
		}
		return nil // delivered by a replay already
	}
	missed := (t.started && seq > t.next) || (!t.started && t.countsFromZero(seq) && seq > 0)
	if missed {
		t.gaps++
	}
	if missed && t.cfg.Replay {
		from := uint64(0)
		if t.started {
			from = t.next
		}
		return t.hold(seq, payload, t.replay(nil, from)...)
	}
	return t.place(nil, seq, payload, ResyncHistoryMissing, true)
}

// Replayed handles one batch from the replay endpoint. An answer later than
// the next expected seq means the buffer no longer holds that history.
func (t *Tracker) Replayed(seq uint64, payload []byte) []Action {
	if !t.replaying {
		return nil // a late answer to an abandoned replay
	}
	if t.verifying {
		t.verifying = false
		if seq == t.next-1 && xxh3.Hash(payload) == t.lastHash {
			return nil // the publisher still has the last delivered batch: the history continues
		}
		// Another batch under a delivered seq (a publisher restart hidden by
		// the gap: its new seqs passed ours while the subscription was
		// down), or the buffer no longer holds it (continuity unknown).
		// Start over from everything the buffer holds.
		why := ResyncHistoryMissing
		if seq == t.next-1 || t.belowHistory {
			why = ResyncRestart
		}
		return t.startOver(why)
	}
	if !t.started || seq >= t.next {
		t.replayGot++
	}
	// Held live batches wait for the replay's end: for a seq the replay
	// holds, its copy is the publisher's, while a live one may be a stale
	// batch of a previous publisher that arrived late (its connection's
	// last messages interleaved with the new one's).
	return t.place(nil, seq, payload, ResyncHistoryMissing, false)
}

// ReplayEnd handles the replay's end marker. A gap left before the held
// batches after a replay that did deliver, or that began with no history
// (the engine may have answered before it published them), may have opened
// while the engine was answering (the batch was published after it read
// its buffer): ask again from there, a bounded number of times. A replay that delivered
// nothing means the buffer no longer holds the history; one that did not
// even return the batch it was to verify means the publisher no longer has
// it (it restarted, or its buffer moved on): start over.
func (t *Tracker) ReplayEnd() []Action {
	if !t.replaying {
		return nil
	}
	if t.verifying {
		why := ResyncHistoryMissing
		if t.belowHistory {
			why = ResyncRestart // a live seq under the history, which the publisher no longer has
		}
		return t.startOver(why)
	}
	acts := t.drain(nil, false, 0)
	if !t.started && t.replayFresh && len(t.buffered) > 0 && t.retries < maxReplayRetries {
		// Nothing delivered the start of the history: the first held batch
		// starts it, as at the replay's final end, and the gap after it is
		// asked for below.
		first := t.buffered[0]
		t.buffered = t.buffered[1:]
		acts = t.drain(t.place(acts, first.seq, first.payload, ResyncHistoryMissing, true), false, 0)
	}
	if (t.replayGot > 0 || t.replayFresh) && t.started && len(t.buffered) > 0 && t.buffered[0].seq > t.next && t.retries < maxReplayRetries {
		t.retries++
		return t.replay(acts, t.next)
	}
	return append(acts, t.stopReplay(ResyncHistoryMissing)...)
}

// ReplayTimeout is called when a replay produced no end marker in time (an
// engine without replay never answers). If the replay was to verify the
// delivered history, that history is unverified: its state is dropped now.
func (t *Tracker) ReplayTimeout() []Action {
	if !t.replaying {
		return nil
	}
	var acts []Action
	if t.verifying {
		t.verifying = false
		acts = t.drop(ResyncReplayTimeout)
	}
	return append(acts, t.stopReplay(ResyncReplayTimeout)...)
}

// startOver drops the stream's state now and asks the replay for
// everything the buffer holds, as at start: the delivered history does not
// continue into the publisher's. The drop does not wait for the replay — a
// restarted publisher's buffer may hold nothing yet.
func (t *Tracker) startOver(why ResyncReason) []Action {
	acts := t.drop(why)
	t.started, t.firstWhy, t.resumed, t.hashKnown = false, why, false, false
	return t.replay(acts, 0)
}

// drop returns the Drop of the delivered state (none when nothing was
// delivered or it is dropped already).
func (t *Tracker) drop(why ResyncReason) []Action {
	if !t.started || t.dropped {
		return nil
	}
	t.dropped, t.resumed = true, false
	return []Action{{Kind: Drop, Seq: t.next - 1, Reason: why}}
}

func (t *Tracker) stopReplay(gap ResyncReason) []Action {
	if !t.replaying {
		return nil
	}
	t.replaying, t.retries = false, 0
	return t.drain(nil, true, gap)
}

// replay asks for every batch from seq from on. A replay that continues
// the delivered history starts one batch earlier, at the last delivered
// one, to verify that the publisher still has it (Replayed).
func (t *Tracker) replay(acts []Action, from uint64) []Action {
	t.replaying, t.replayGot, t.belowHistory = true, 0, false
	t.replayFresh = !t.started
	t.verifying = t.started && t.hashKnown && from == t.next && from > 0
	if t.verifying {
		from--
	}
	return append(acts, Action{Kind: RequestReplay, Seq: from})
}

// place delivers seq, preceded by a Resync when it does not continue the
// delivered history (gap names the reason for a forward gap).
func (t *Tracker) place(acts []Action, seq uint64, payload []byte, gap ResyncReason, live bool) []Action {
	switch {
	case t.started && seq < t.next:
		return acts // a duplicate
	case !t.started:
		exact := t.countsFromZero(seq) && seq == 0
		acts = append(acts, Action{Kind: Resync, Reason: t.firstWhy, Exact: exact})
	case seq > t.next:
		acts = append(acts, Action{Kind: Resync, Reason: gap})
	case t.resumed:
		acts = append(acts, Action{Kind: Resync, Reason: ResyncResumed, Exact: t.resumeExact, Keep: true})
	}
	t.started, t.next, t.resumed, t.dropped = true, seq+1, false, false
	if t.cfg.Replay {
		t.lastHash, t.hashKnown = xxh3.Hash(payload), true
	}
	return append(acts, Action{Kind: Deliver, Seq: seq, Payload: payload, Live: live})
}

// countsFromZero reports whether a publisher whose first seq (as heard)
// is seq counts from 0.
func (t *Tracker) countsFromZero(seq uint64) bool {
	if t.cfg.DetectSeqStart {
		return !engine.IsTimestampSeq(seq)
	}
	return t.cfg.SeqStartsAtZero
}

// hold buffers a live batch during a replay; past the cap the replay is
// abandoned and what is held is delivered with the gap accepted.
func (t *Tracker) hold(seq uint64, payload []byte, acts ...Action) []Action {
	if t.started && seq < t.next {
		return acts // already delivered by the replay
	}
	i, found := slices.BinarySearchFunc(t.buffered, seq, func(p pending, s uint64) int { return cmp.Compare(p.seq, s) })
	if found {
		return acts
	}
	t.buffered = slices.Insert(t.buffered, i, pending{seq, payload})
	if len(t.buffered) <= t.cfg.ReorderCap {
		return acts
	}
	t.replaying = false
	return t.drain(acts, true, ResyncReorderOverflow)
}

// drain delivers the held batches that continue the history; with final
// (the replay is over) the rest too, accepting the gap before them.
func (t *Tracker) drain(acts []Action, final bool, gap ResyncReason) []Action {
	n := 0
	for _, p := range t.buffered {
		if !final && (!t.started || p.seq > t.next) {
			break
		}
		acts = t.place(acts, p.seq, p.payload, gap, true)
		n++
	}
	clear(t.buffered[:n])
	t.buffered = t.buffered[n:]
	if len(t.buffered) == 0 {
		t.buffered = nil
	}
	return acts
}
