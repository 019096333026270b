package listener

import (
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
)

// Why a message on a socket shared by topic (Config.TopicIdentity) is
// dropped; counted in Stats.BadFrames.
const (
	// refuseTopic: the topic does not follow kv@<pod>@<model>, so it
	// names no engine.
	refuseTopic = "topic_identity"
	// refuseFull: a new pod, and the socket already tracks MaxStreams.
	refuseFull = "too_many_streams"
	// refuseCollision: a new pod whose worker id (Config.Pods, or the
	// hash of its name) another pod on the socket already has. Its
	// batches would interleave with the other pod's in one stream's
	// state, so they are dropped instead.
	refuseCollision = "topic_worker_collision"
)

// topicStreams tells apart the engines that dial one bound socket, by the
// pod their topic names: one stream per pod, each with its own Tracker (so
// its own seqs, and its order kept), at most max of them. A plain value
// for the listener actor's goroutine; newStream makes a pod's stream the
// first time it is heard.
type topicStreams struct {
	max       int
	byPod     map[string]*stream
	owner     map[messages.StreamID]string // the pod each stream belongs to
	newStream func(messages.StreamID) *stream
}

func newTopicStreams(max int, newStream func(messages.StreamID) *stream) topicStreams {
	return topicStreams{max: max, byPod: map[string]*stream{}, owner: map[messages.StreamID]string{}, newStream: newStream}
}

// lookup returns pod's stream, made now (created) when pod is new and id
// (its stream id) free, or the reason its message is dropped.
func (t *topicStreams) lookup(pod string, id messages.StreamID) (st *stream, created bool, refused string) {
	if st, ok := t.byPod[pod]; ok {
		return st, false, ""
	}
	if len(t.byPod) >= t.max {
		return nil, false, refuseFull
	}
	if _, taken := t.owner[id]; taken {
		return nil, false, refuseCollision
	}
	st = t.newStream(id)
	st.pod = pod
	t.byPod[pod], t.owner[id] = st, pod
	return st, true, ""
}

// sorted returns the streams by pod.
func (t *topicStreams) sorted() []*stream {
	out := make([]*stream, 0, len(t.byPod))
	for _, st := range t.byPod {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *stream) int { return strings.Compare(a.pod, b.pod) })
	return out
}

// TopicStream is one engine heard on a socket shared by topic
// (Stats.Topics): the pod its topic names, the stream it is (worker from
// Config.Pods or the pod's hash, the socket's dp rank), and its own
// sequencing.
type TopicStream struct {
	Pod    string
	Topic  string // of its last batch
	Stream messages.StreamID
	// NextSeq is the next seq expected of it; Received counts its
	// batches; Gaps its forward seq gaps; Resyncs the times its state was
	// dropped (a restart, a gap, the socket lost).
	NextSeq  uint64
	Received uint64
	Gaps     uint64
	Resyncs  uint64
}

// topicStats returns the per-pod state, sorted by pod.
func (t *topicStreams) topicStats() []TopicStream {
	out := make([]TopicStream, 0, len(t.byPod))
	for _, st := range t.sorted() {
		next, _ := st.tracker.Next()
		out = append(out, TopicStream{Pod: st.pod, Topic: string(st.topic), Stream: st.id, NextSeq: next,
			Received: st.received, Gaps: st.tracker.Gaps(), Resyncs: st.resyncs})
	}
	return out
}
