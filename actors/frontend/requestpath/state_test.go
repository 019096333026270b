package requestpath

import (
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// Scenarios as a data plane produces them: each step an observation (s:N
// served by worker N, m:N prefill leg retried on worker N, b first byte,
// d done) and the action expected (n none, i ignored, r:N rebook to N,
// v:N move the prefill booking to N, p prefill done, f free).
func TestStateScenarios(t *testing.T) {
	for name, script := range map[string]string{
		"streamed on the first choice":           "s:1 n  b p  b n  b n  d f",
		"retried on the next best":               "s:2 r:2  b p  d f",
		"no served report":                       "b p  d f",
		"reset before any byte":                  "s:1 n  d f",
		"connect failed everywhere":              "d f",
		"a second served report changes nothing": "s:2 r:2  s:3 i  b p  d f",
		"observations after free are ignored":    "s:1 n  d f  b i  s:2 i  d i",
		"first byte then served (late report)":   "b p  s:2 i  d f",
		"prefill retried on the alternate":       "m:7 v:7  s:1 n  b p  d f",
		"one prefill move only":                  "m:7 v:7  m:8 i  b p  d f",
		"no prefill move after prefill done":     "b p  m:7 i  d f",
		"no prefill move after free":             "d f  m:7 i",
	} {
		t.Run(name, func(t *testing.T) {
			st := NewState(messages.WorkerKey{Worker: 1})
			f := strings.Fields(script)
			for i := 0; i+1 < len(f); i += 2 {
				obs, want := f[i], f[i+1]
				var a Action
				switch {
				case strings.HasPrefix(obs, "s:"):
					a = st.Served(messages.WorkerKey{Worker: worker(obs[2:])})
				case strings.HasPrefix(obs, "m:"):
					a = st.MovePrefill(messages.WorkerKey{Worker: worker(obs[2:])})
				case obs == "b":
					a = st.FirstByte()
				case obs == "d":
					a = st.Done()
				}
				if got := describe(a); got != want {
					t.Fatalf("step %d (%s): action %s, want %s", i/2, obs, got, want)
				}
			}
			if !st.Freed() {
				t.Errorf("booking not freed at the end")
			}
		})
	}
}

func worker(s string) messages.WorkerID { return messages.WorkerID(s[0] - '0') }

func describe(a Action) string {
	switch {
	case a.Ignored:
		return "i"
	case a.Kind == Rebook:
		return "r:" + string(rune('0'+a.To.Worker))
	case a.Kind == MovePrefill:
		return "v:" + string(rune('0'+a.To.Worker))
	case a.Kind == PrefillDone:
		return "p"
	case a.Kind == Free:
		return "f"
	}
	return "n"
}
