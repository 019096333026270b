package admission

import (
	"strconv"
	"strings"
	"testing"
)

// edgeStep is one input to an EdgeState: a request arriving at an endpoint
// ("+route 100": Content-Length 100, "+route ?": chunked, "+route! 10":
// with the gate full), or the n-th admitted request finishing ("-2").
type edgeStep string

// feedEdge runs steps and returns what each arrival got: "ok" or its
// refusal's reason, space-separated, then "| n=REQUESTS b=BYTES".
func feedEdge(t *testing.T, s *EdgeState, caps map[string]int64, steps ...edgeStep) string {
	t.Helper()
	var out []string
	var tickets []Ticket
	for _, st := range steps {
		f := strings.Fields(string(st))
		switch {
		case strings.HasPrefix(f[0], "+"):
			name, over := strings.CutSuffix(f[0][1:], "!")
			cl := int64(-1)
			if f[1] != "?" {
				cl = int64(atoi(t, f[1]))
			}
			tk, r := s.Admit(Ask{Endpoint: s.Endpoint(name, caps[name]), ContentLength: cl, Overloaded: over})
			if r == ReasonNone {
				tickets = append(tickets, tk)
				out = append(out, "ok")
			} else {
				out = append(out, r.String())
			}
		case strings.HasPrefix(f[0], "-"):
			s.Done(tickets[atoi(t, f[0][1:])])
		default:
			t.Fatalf("bad step %q", st)
		}
	}
	n, b := s.InFlight()
	return strings.Join(out, " ") + " | n=" + strconv.Itoa(n) + " b=" + strconv.FormatInt(b, 10)
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad step number %q", s)
	}
	return n
}

func TestEdgeScenarios(t *testing.T) {
	caps := map[string]int64{"route": 1000, "proxy": 0}
	two := EdgeLimits{MaxInFlight: 2}
	bytes := EdgeLimits{MaxBytesInFlight: 1500}
	perEndpoint := EdgeLimits{MaxInFlight: 10, EndpointMaxInFlight: map[string]int{"proxy": 1}}
	for _, tc := range []struct {
		name   string
		limits EdgeLimits
		steps  []edgeStep
		want   string
	}{
		{"no caps admit everything", EdgeLimits{}, []edgeStep{"+route 10", "+route 10", "+proxy 99999"}, "ok ok ok | n=3 b=100019"},
		{"host cap refuses the third, admits again once one is done", two,
			[]edgeStep{"+route 10", "+proxy 10", "+route 10", "-0", "+route 10"}, "ok ok host_in_flight ok | n=2 b=20"},
		{"an over-cap Content-Length is refused even when idle", two, []edgeStep{"+route 1001", "+route 1000"}, "body_too_large ok | n=1 b=1000"},
		{"an endpoint without a body cap checks no size", two, []edgeStep{"+proxy 5000000"}, "ok | n=1 b=5000000"},
		{"bytes budget", bytes, []edgeStep{"+route 1000", "+route 600", "+route 500", "-0", "+route 600"}, "ok bytes_in_flight ok ok | n=2 b=1100"},
		{"a chunked body is charged its endpoint's cap", bytes, []edgeStep{"+route ?", "+route 501", "+route 500"}, "ok bytes_in_flight ok | n=2 b=1500"},
		{"the idle edge takes a body over the budget it is within the cap of", EdgeLimits{MaxBytesInFlight: 500}, []edgeStep{"+route 900", "+route 1"}, "ok bytes_in_flight | n=1 b=900"},
		{"the gate full refuses, but never the first request", two, []edgeStep{"+route! 10", "+route! 10", "-0", "+route 10"}, "ok overloaded ok | n=1 b=10"},
		{"endpoint cap", perEndpoint, []edgeStep{"+proxy 1", "+proxy 1", "+route 1", "-0", "+proxy 1"}, "ok endpoint_in_flight ok ok | n=2 b=2"},
		{"done frees every share", two, []edgeStep{"+route 10", "+route ?", "-0", "-1"}, "ok ok | n=0 b=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := feedEdge(t, NewEdgeState(tc.limits), caps, tc.steps...); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
