package listener

import (
	"slices"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
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
	// refuseUnknown: with Config.KnownPodsOnly, a pod no registration
	// names (Config.Pods, AddPod).
	refuseUnknown = "unknown_pod"
)

// topicStreams tells apart the engines publishing on one socket, by the pod
// their topic names: one stream per pod, each with its own Tracker (so its
// own seqs, and its order kept), at most max of them. pods maps a pod to its
// worker id; a pod it does not name takes the hash of its name, or with
// known is refused. A plain value for the listener actor's goroutine;
// newStream makes a pod's stream the first time it is heard.
type topicStreams struct {
	max       int
	rank      messages.DpRank
	known     bool
	pods      map[string]messages.WorkerID
	byPod     map[string]*stream
	owner     map[messages.StreamID]string // the pod each stream belongs to
	newStream func(messages.StreamID) *stream
}

func newTopicStreams(max int, rank messages.DpRank, known bool, pods map[string]messages.WorkerID,
	newStream func(messages.StreamID) *stream) topicStreams {
	t := topicStreams{max: max, rank: rank, known: known, pods: map[string]messages.WorkerID{},
		byPod: map[string]*stream{}, owner: map[messages.StreamID]string{}, newStream: newStream}
	for pod, w := range pods {
		t.pods[pod] = w
	}
	return t
}

// streamID is the stream a pod's batches make, and whether it may have one.
func (t *topicStreams) streamID(pod string) (messages.StreamID, bool) {
	w, ok := t.pods[pod]
	if !ok {
		if t.known {
			return messages.StreamID{}, false
		}
		w = messages.WorkerID(xxh3.HashString(pod))
	}
	return messages.StreamID{Worker: w, DpRank: t.rank}, true
}

// lookup returns pod's stream, made now (created) when pod is new and its
// stream id free, or the reason its message is dropped.
func (t *topicStreams) lookup(pod string) (st *stream, created bool, refused string) {
	if st, ok := t.byPod[pod]; ok {
		return st, false, ""
	}
	id, ok := t.streamID(pod)
	switch {
	case !ok:
		return nil, false, refuseUnknown
	case len(t.byPod) >= t.max:
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

// add maps pod to worker w. A stream the pod has under another id is
// dropped (its next message makes the new one); it is returned.
func (t *topicStreams) add(pod string, w messages.WorkerID) (dropped *stream) {
	t.pods[pod] = w
	if st, ok := t.byPod[pod]; ok && st.id.Worker != w {
		t.remove(pod)
		return st
	}
	return nil
}

// forget unmaps pod and drops its stream (returned, nil when it had none):
// with known, its messages are refused from now on; otherwise they make a
// new stream under the pod's hash.
func (t *topicStreams) forget(pod string) *stream {
	delete(t.pods, pod)
	st := t.byPod[pod]
	if st != nil {
		t.remove(pod)
	}
	return st
}

func (t *topicStreams) remove(pod string) {
	delete(t.owner, t.byPod[pod].id)
	delete(t.byPod, pod)
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

// state returns the stream's TopicStream.
func (st *stream) state() TopicStream {
	next, _ := st.tracker.Next()
	return TopicStream{Pod: st.pod, Topic: string(st.topic), Stream: st.id, NextSeq: next,
		Received: st.received, Gaps: st.tracker.Gaps(), Resyncs: st.resyncs}
}

// topicStats returns the per-pod state, sorted by pod.
func (t *topicStreams) topicStats() []TopicStream {
	out := make([]TopicStream, 0, len(t.byPod))
	for _, st := range t.sorted() {
		out = append(out, st.state())
	}
	return out
}
