package listener

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// heard feeds a topicStreams the pods of a socket's messages, each
// "pod=worker", and renders what each became: "pod:worker+" a stream made
// now, "pod:worker" an existing one, "pod!reason" refused.
func heard(t *topicStreams, msgs ...string) string {
	var out []string
	for _, m := range msgs {
		pod, worker, _ := strings.Cut(m, "=")
		var w uint64
		fmt.Sscan(worker, &w)
		st, created, refused := t.lookup(pod, messages.StreamID{Worker: messages.WorkerID(w)})
		switch {
		case refused != "":
			out = append(out, pod+"!"+refused)
		case created:
			out = append(out, fmt.Sprintf("%s:%d+", pod, st.id.Worker))
		default:
			out = append(out, fmt.Sprintf("%s:%d", pod, st.id.Worker))
		}
	}
	return strings.Join(out, " ")
}

func newTestTopics(max int) *topicStreams {
	t := newTopicStreams(max, func(id messages.StreamID) *stream {
		return &stream{id: id, tracker: NewTracker(TrackerConfig{SeqStartsAtZero: true})}
	})
	return &t
}

// One stream per pod, made when first heard; the cap refuses new pods,
// never the ones already tracked; a pod whose worker id another pod holds
// is refused, not merged into that pod's stream.
func TestTopicStreamsScenarios(t *testing.T) {
	for _, c := range []struct {
		name string
		max  int
		msgs []string
		want string
	}{
		{"each pod its own stream, kept", 4, []string{"a=11", "b=12", "a=11", "b=12"}, "a:11+ b:12+ a:11 b:12"},
		{"the cap refuses new pods only", 2, []string{"a=11", "b=12", "c=13", "a=11", "c=13"},
			"a:11+ b:12+ c!too_many_streams a:11 c!too_many_streams"},
		{"two pods, one worker id", 4, []string{"a=11", "z=11", "a=11", "z=11"}, "a:11+ z!topic_worker_collision a:11 z!topic_worker_collision"},
		{"a pod keeps its stream whatever id it would get now", 4, []string{"a=11", "a=99"}, "a:11+ a:11"},
		{"cap 1", 1, []string{"b=2", "a=1"}, "b:2+ a!too_many_streams"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := heard(newTestTopics(c.max), c.msgs...); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// Each pod's stream keeps its own sequencing: one pod restarting or
// skipping ahead does not touch the other's, and the per-pod state lists
// them by pod.
func TestTopicStreamsSequenceIndependently(t *testing.T) {
	ts := newTestTopics(4)
	a, _, _ := ts.lookup("pod-a", messages.StreamID{Worker: 1})
	b, _, _ := ts.lookup("pod-b", messages.StreamID{Worker: 2})
	got := []string{
		feed(a.tracker, L(0), L(1), L(2)),
		feed(b.tracker, L(0), L(1)),
		feed(a.tracker, L(0)), // pod-a restarted
		feed(b.tracker, L(2), L(4)),
	}
	want := []string{"X:start! D0 D1 D2", "X:start! D0 D1", "X:restart! D0", "D2 X:history_missing D4"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	a.received, b.resyncs = 4, 1
	st := ts.topicStats()
	if len(st) != 2 || st[0].Pod != "pod-a" || st[0].NextSeq != 1 || st[0].Received != 4 ||
		st[1].Pod != "pod-b" || st[1].Stream.Worker != 2 || st[1].NextSeq != 5 || st[1].Gaps != 1 || st[1].Resyncs != 1 {
		t.Errorf("per-pod state %+v", st)
	}
}
