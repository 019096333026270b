package listener

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
)

// AddPod maps a pod of a socket shared by topic to a worker (as
// Config.Pods does), answered with PodUpdated. A stream the pod had under
// another worker id is dropped; its next batch starts the new one.
type AddPod struct {
	Pod    string
	Worker messages.WorkerID
}

// ForgetPod unmaps a pod of a socket shared by topic and drops its stream,
// answered with PodUpdated once done: no batch of the pod is delivered
// after the answer (with Config.KnownPodsOnly its messages are refused
// from then on).
type ForgetPod struct{ Pod string }

// PodUpdated answers AddPod and ForgetPod; Dropped says the pod had a
// stream, now dropped.
type PodUpdated struct {
	Pod     string
	Dropped bool
}

// streamOf returns the stream a message on topic belongs to, or nil (the
// message is dropped and counted; the first refusal of each kind is
// logged).
func (a *Actor) streamOf(topic []byte) *stream {
	if !a.cfg.TopicIdentity {
		return a.main
	}
	t, ok := a.adapter.ParseTopic(topic)
	if !ok {
		a.refuse(refuseTopic, "topic", string(topic))
		return nil
	}
	st, created, refused := a.topics.lookup(t.Pod)
	switch {
	case refused != "":
		a.refuse(refused, "pod", t.Pod)
	case created:
		a.log.Info("new engine on a shared socket", "pod", t.Pod, "worker", st.id.Worker, "model", t.Model)
	}
	return st
}

// refuse counts a message dropped before its stream was known.
func (a *Actor) refuse(why, key, value string) {
	if a.stats.BadFrames[why]++; a.stats.BadFrames[why] == 1 {
		a.log.Warn("message on a shared socket refused", key, value, "reason", why)
	}
}

func (a *Actor) addPod(ctx actor.Context, m *AddPod) {
	dropped := a.topics.add(m.Pod, m.Worker)
	if dropped != nil {
		a.log.Info("pod remapped on a shared socket: its stream starts again", "pod", m.Pod,
			"worker", m.Worker, "was", dropped.id.Worker)
	}
	ctx.Respond(&PodUpdated{Pod: m.Pod, Dropped: dropped != nil})
}

func (a *Actor) forgetPod(ctx actor.Context, m *ForgetPod) {
	dropped := a.topics.forget(m.Pod)
	if dropped != nil {
		a.log.Info("pod removed from a shared socket", "pod", m.Pod, "worker", dropped.id.Worker)
	}
	ctx.Respond(&PodUpdated{Pod: m.Pod, Dropped: dropped != nil})
}

// countResync counts a resync of st, in the socket's counters and, for a
// pod's stream, in its own.
func (a *Actor) countResync(st *stream, why ResyncReason) {
	a.stats.Resyncs[why.String()]++
	if st != a.main {
		st.reasons[why.String()]++
	}
}

// podStats is one pod's view of a socket shared by topic: its own
// batches, gaps, resyncs and seq (zero before it is heard, Topics then
// empty), the socket's connection and window, and of the socket's drops
// only its socket errors (each one broke every pod's connection); drops
// no pod can be charged with (topics outside the convention, refused
// pods) are in the socket's Stats alone.
func (a *Actor) podStats(pod string) *Stats {
	s := &Stats{BadFrames: map[string]uint64{}, Resyncs: map[string]uint64{}, Replays: map[string]uint64{},
		InFlight: a.window.inFlight(), Connected: a.connected, Subscribed: a.stats.Subscribed}
	for why, n := range a.stats.BadFrames {
		if strings.HasPrefix(why, "socket: ") {
			s.BadFrames[why] = n
		}
	}
	st := a.topics.byPod[pod]
	if st == nil {
		return s
	}
	ts := st.state()
	s.Received, s.Delivered, s.Gaps, s.NextSeq = st.received, st.delivered, ts.Gaps, ts.NextSeq
	s.Resyncs = copyMap(st.reasons)
	s.Streams = map[messages.StreamID]uint64{st.id: ts.NextSeq}
	s.Topics = []TopicStream{ts}
	return s
}
