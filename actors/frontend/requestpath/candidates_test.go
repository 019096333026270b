package requestpath

import (
	"fmt"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

func TestCandidates(t *testing.T) {
	res := api.RouteResult{WorkerID: 3, OverlapBlocks: 4, ServingEndpoint: "10.0.0.3:8000", Scores: []api.RouteScore{
		{WorkerID: 1, Logit: 5, ActiveDecodeBlocks: 2, ServingEndpoint: "http://10.0.0.1:8000"},
		{WorkerID: 2, Logit: 1, ServingEndpoint: ""},
		{WorkerID: 3, Logit: 2, OverlapBlocks: 4, ActiveDecodeBlocks: 9, ServingEndpoint: "10.0.0.3:8000"},
		{WorkerID: 4, Logit: 5, ActiveDecodeBlocks: 1, ServingEndpoint: "10.0.0.4:8000"},
		{WorkerID: 5, Logit: 3, ServingEndpoint: "nonsense"},
	}}
	for _, c := range []struct {
		name    string
		subset  []string
		max     int
		want    string
		skipped Skipped
	}{
		{"chosen first, then by cost", nil, 0, "3 4 1", Skipped{SkipNoServingEndpoint: 1, SkipBadServingEndpoint: 1}},
		{"bounded", nil, 2, "3 4", Skipped{SkipNoServingEndpoint: 1, SkipBadServingEndpoint: 1}},
		{"subset", []string{"10.0.0.1:8000", "10.0.0.9:1"}, 0, "1", Skipped{SkipNoServingEndpoint: 1, SkipBadServingEndpoint: 1, SkipNotInSubset: 2}},
		{"empty subset", []string{}, 0, "", Skipped{SkipNoServingEndpoint: 1, SkipBadServingEndpoint: 1, SkipNotInSubset: 3}},
	} {
		cands, skipped := Candidates(res, c.subset, c.max)
		got := ""
		for i, cd := range cands {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprint(cd.Key.Worker)
		}
		if got != c.want || fmt.Sprint(skipped) != fmt.Sprint(c.skipped) {
			t.Errorf("%s: candidates %q skipped %v, want %q skipped %v", c.name, got, skipped, c.want, c.skipped)
		}
	}
	cands, _ := Candidates(res, nil, 0)
	if cands[0].Endpoint.BaseURL() != "http://10.0.0.3:8000" || cands[0].OverlapBlocks != 4 || cands[0].BookedBlocks != 9 {
		t.Errorf("first candidate %+v", cands[0])
	}
	// Without scores, the chosen rank alone.
	if only, _ := Candidates(api.RouteResult{WorkerID: 7, ServingEndpoint: "h:1"}, nil, 0); len(only) != 1 || only[0].Key.Worker != 7 {
		t.Errorf("without scores: %+v", only)
	}
	two := []Candidate{{BookedBlocks: 9}, {BookedBlocks: 2}}
	for threshold, want := range map[uint64]string{0: "", 1: ShedBooked, 2: "", 9: ""} {
		if got := Overloaded(two, threshold); got != want {
			t.Errorf("overloaded above %d blocks: %q, want %q", threshold, got, want)
		}
	}
	if Overloaded(nil, 1) != "" {
		t.Errorf("no candidates counts as overloaded")
	}
	// A saturated engine has no room, whatever it has booked.
	for _, c := range []struct {
		cands     []Candidate
		threshold uint64
		want      string
	}{
		{[]Candidate{{Saturated: true}, {BookedBlocks: 2}}, 0, ""},
		{[]Candidate{{Saturated: true}, {Saturated: true}}, 0, ShedSaturated},
		{[]Candidate{{Saturated: true}, {BookedBlocks: 9}}, 4, ShedSaturated},
		{[]Candidate{{Saturated: true}, {BookedBlocks: 3}}, 4, ""},
	} {
		if got := Overloaded(c.cands, c.threshold); got != c.want {
			t.Errorf("%+v above %d: %q, want %q", c.cands, c.threshold, got, c.want)
		}
	}
	// The score's flag reaches the candidate.
	sat, _ := Candidates(api.RouteResult{WorkerID: 7, ServingEndpoint: "h:1",
		Scores: []api.RouteScore{{WorkerID: 7, ServingEndpoint: "h:1", Saturated: true}}}, nil, 0)
	if len(sat) != 1 || !sat[0].Saturated {
		t.Errorf("saturated score: %+v", sat)
	}
}

func TestInSubsetBareIPMeansEveryPort(t *testing.T) {
	for _, tc := range []struct {
		subset []string
		ep     string
		want   bool
	}{
		{[]string{"10.0.0.1:8000"}, "10.0.0.1:8000", true},
		{[]string{"10.0.0.1:8000"}, "10.0.0.1:8001", false},
		{[]string{"10.0.0.1"}, "10.0.0.1:8001", true}, // a pod's data-parallel ranks, one targetPort each
		{[]string{"10.0.0.1"}, "10.0.0.10:8001", false},
		{[]string{"::1"}, "[::1]:8000", true},
		{[]string{"[::1]"}, "[::1]:8000", true},
		{nil, "10.0.0.1:8000", false},
	} {
		if got := InSubset(tc.subset, tc.ep); got != tc.want {
			t.Errorf("InSubset(%v, %s) = %v, want %v", tc.subset, tc.ep, got, tc.want)
		}
	}
}
