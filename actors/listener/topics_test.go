package listener

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// heard feeds a topicStreams a socket's messages and its owner's changes,
// and renders what each did. "pod" is a message of pod: "pod:W+" made a
// stream of worker W now ("pod:#+" under the pod's hash), "pod:W" went to
// its existing stream, "pod!reason" was refused. "+pod=W" maps pod to
// worker W (AddPod), rendered "+pod", or "+pod~W" when it dropped the
// pod's stream of worker W; "-pod" forgets pod (ForgetPod), rendered
// "-pod", or "-pod~W" when it dropped its stream.
func heard(t *topicStreams, steps ...string) string {
	var out []string
	worker := func(st *stream) string {
		if st.id.Worker == messages.WorkerID(xxh3.HashString(st.pod)) {
			return "#"
		}
		return fmt.Sprint(st.id.Worker)
	}
	for _, s := range steps {
		switch {
		case strings.HasPrefix(s, "+"):
			pod, w, _ := strings.Cut(s[1:], "=")
			var id uint64
			fmt.Sscan(w, &id)
			if st := t.add(pod, messages.WorkerID(id)); st != nil {
				out = append(out, "+"+pod+"~"+worker(st))
			} else {
				out = append(out, "+"+pod)
			}
		case strings.HasPrefix(s, "-"):
			if st := t.forget(s[1:]); st != nil {
				out = append(out, s+"~"+worker(st))
			} else {
				out = append(out, s)
			}
		default:
			st, created, refused := t.lookup(s)
			switch {
			case refused != "":
				out = append(out, s+"!"+refused)
			case created:
				out = append(out, s+":"+worker(st)+"+")
			default:
				out = append(out, s+":"+worker(st))
			}
		}
	}
	return strings.Join(out, " ")
}

func newTestTopics(max int, known bool, pods map[string]messages.WorkerID) *topicStreams {
	t := newTopicStreams(max, 0, known, pods, func(id messages.StreamID) *stream {
		return &stream{id: id, tracker: NewTracker(TrackerConfig{SeqStartsAtZero: true})}
	})
	return &t
}

// One stream per pod, made when first heard; the cap refuses new pods,
// never the ones already tracked; a pod whose worker id another pod holds
// is refused, not merged into that pod's stream; with known pods only, a
// pod no one mapped is refused; the owner's changes take effect at the
// pod's next message.
func TestTopicStreamsScenarios(t *testing.T) {
	ab := map[string]messages.WorkerID{"a": 11, "b": 12}
	for _, c := range []struct {
		name  string
		max   int
		known bool
		pods  map[string]messages.WorkerID
		steps []string
		want  string
	}{
		{"each pod its own stream, kept", 4, false, ab, []string{"a", "b", "a", "b"}, "a:11+ b:12+ a:11 b:12"},
		{"an unmapped pod takes its hash", 4, false, ab, []string{"a", "z", "z"}, "a:11+ z:#+ z:#"},
		{"the cap refuses new pods only", 2, false, ab, []string{"a", "b", "c", "a", "c"},
			"a:11+ b:12+ c!too_many_streams a:11 c!too_many_streams"},
		{"two pods, one worker id", 4, false, map[string]messages.WorkerID{"a": 11, "z": 11}, []string{"a", "z", "a", "z"},
			"a:11+ z!topic_worker_collision a:11 z!topic_worker_collision"},
		{"cap 1", 1, false, ab, []string{"b", "a"}, "b:12+ a!too_many_streams"},
		{"known pods only: an unmapped pod is refused", 4, true, ab, []string{"a", "z", "b"}, "a:11+ z!unknown_pod b:12+"},
		{"known pods only: added, heard, forgotten, refused again", 4, true, nil,
			[]string{"a", "+a=11", "a", "a", "-a", "a", "+a=11", "a"}, "a!unknown_pod +a a:11+ a:11 -a~11 a!unknown_pod +a a:11+"},
		{"a pod mapped anew starts a new stream", 4, false, ab, []string{"a", "+a=21", "a", "+a=21", "a"}, "a:11+ +a~11 a:21+ +a a:21"},
		{"an unmapped pod heard, then mapped", 4, false, nil, []string{"z", "+z=5", "z"}, "z:#+ +z~# z:5+"},
		{"forgotten without known pods: back under its hash", 4, false, ab, []string{"a", "-a", "a"}, "a:11+ -a~11 a:#+"},
		{"forgetting frees a place under the cap", 1, true, ab, []string{"a", "b", "-a", "b"}, "a:11+ b!too_many_streams -a~11 b:12+"},
		{"forgetting a pod never heard drops nothing", 4, true, ab, []string{"-b", "b"}, "-b b!unknown_pod"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := heard(newTestTopics(c.max, c.known, c.pods), c.steps...); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// Each pod's stream keeps its own sequencing: one pod restarting or
// skipping ahead does not touch the other's, and the per-pod state lists
// them by pod.
func TestTopicStreamsSequenceIndependently(t *testing.T) {
	ts := newTestTopics(4, true, map[string]messages.WorkerID{"pod-a": 1, "pod-b": 2})
	a, _, _ := ts.lookup("pod-a")
	b, _, _ := ts.lookup("pod-b")
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
