package service

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReachabilityDecision(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	var r reachability
	steps := []struct {
		at       time.Duration
		answered map[string]bool
		want     []string
	}{
		{0, map[string]bool{"a:1": true, "b:1": false}, nil},                           // b just listed: within grace
		{2 * time.Second, map[string]bool{"a:1": true, "b:1": false}, nil},             // still within grace
		{3 * time.Second, map[string]bool{"a:1": true, "b:1": false}, []string{"b:1"}}, // b never answered
		{4 * time.Second, map[string]bool{"a:1": false, "b:1": true}, nil},             // b answers; a missed one round
		{5 * time.Second, map[string]bool{"a:1": false, "b:1": true}, nil},             // a answered 2 s ago
		{6 * time.Second, map[string]bool{"a:1": false, "b:1": true}, []string{"a:1"}}, // a: no answer for the grace
		{7 * time.Second, map[string]bool{"a:1": false, "b:1": true}, []string{"a:1"}},
		{8 * time.Second, map[string]bool{"b:1": true}, nil}, // a left the member list: forgotten
		{20 * time.Second, map[string]bool{}, nil},           // alone: ready
	}
	for i, s := range steps {
		r.observe(at(s.at), s.answered)
		got := r.unreachable(at(s.at), reachGrace)
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d (t=%v): unreachable %v, want %v", i, s.at, got, s.want)
		}
	}
}

func TestNotReadyReason(t *testing.T) {
	if got := notReadyReason("h:1", nil, nil, reachGrace); got != "" {
		t.Errorf("all reachable: %q, want ready", got)
	}
	got := notReadyReason("h:1", errors.New("connection refused"), []string{"a:1", "b:1"}, reachGrace)
	for _, want := range []string{"advertised address h:1 is unreachable", "connection refused", "members a:1, b:1", "3s"} {
		if !strings.Contains(got, want) {
			t.Errorf("reason %q lacks %q", got, want)
		}
	}
}
