package picker

import (
	"errors"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
)

// FuzzStream drives a Stream with any sequence of data plane messages,
// router answers and resets (the input picks them, and is the body too)
// and checks what must hold whatever the data plane does: no panic, at
// most one Served and one FirstByte, and exactly one Done for a request
// routed (none otherwise) once the stream ends.
func FuzzStream(f *testing.F) {
	f.Add([]byte{0, 4, 2, 9, 4, 5, 6}, []byte(tokenBody))
	f.Add([]byte{0, 1, 1, 2, 10, 4, 5, 8}, []byte(`{"model":"m","prompt":"hi"}`))
	f.Add([]byte{3, 0, 2, 11}, []byte(`{"model":`))
	modes := []et.Modes{et.FullDuplex, et.Buffered, et.Streamed}
	f.Fuzz(func(t *testing.T, ops, body []byte) {
		st := NewStream(StreamConfig{MaxBody: 1 << 12, MaxEndpoints: 2, DefaultModel: "d"}, "r")
		var routed, ended bool
		counts := map[ActionKind]int{}
		apply := func(acts []Action) {
			for _, a := range acts {
				counts[a.Kind]++
				if a.Kind == End || a.Kind == Fail {
					ended = true
				}
			}
		}
		for i, op := range ops {
			if ended {
				break
			}
			var m *extprocv3.ProcessingRequest
			half := body[:len(body)/2]
			switch op % 12 {
			case 0:
				md := modes[i%len(modes)]
				m = et.RequestHeaders(&md, "/v1/completions", false, nil)
			case 1:
				m = et.RequestBody(string(half), false)
			case 2:
				m = et.RequestBody(string(body[len(half):]), true)
			case 3:
				m = et.RequestTrailers()
			case 4:
				m = et.ResponseHeaders("200", "b:1", false)
			case 5:
				m = et.ResponseBody("x", false, "a:1")
			case 6:
				m = et.ResponseBody("", true, "")
			case 7:
				m = et.ResponseTrailers()
			case 8:
				apply(st.Reset())
				ended = true
				continue
			case 9, 10, 11: // the router's answer, when one is asked for
				if counts[Route] == 0 || routed {
					continue
				}
				var err error
				if op%12 == 10 {
					err = errors.Join(ErrNoEndpoint, errors.New("none"))
				}
				acts := st.Decide(Decision{Choice: Choice{Endpoints: []string{"a:1", "b:1"}}, Err: err})
				routed = err == nil && len(acts) > 0 && acts[len(acts)-1].Kind == Decided && acts[len(acts)-1].Outcome <= OutcomeLoadOnly
				apply(acts)
				continue
			}
			apply(st.Handle(m))
		}
		apply(st.Reset())
		if counts[Served] > 1 || counts[FirstByte] > 1 || counts[Route] > 1 {
			t.Fatalf("served %d, first byte %d, routes %d: at most one each", counts[Served], counts[FirstByte], counts[Route])
		}
		if want := map[bool]int{true: 1, false: 0}[routed]; counts[Done] != want {
			t.Fatalf("%d frees for a request routed=%v", counts[Done], routed)
		}
	})
}
