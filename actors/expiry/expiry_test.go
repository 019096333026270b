package expiry

import (
	"testing"
	"time"
)

func TestPassed(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name          string
		deadline, now time.Time
		want          bool
	}{
		{"no deadline", time.Time{}, at, false},
		{"no deadline, zero clock", time.Time{}, time.Time{}, false},
		{"before", at, at.Add(-time.Nanosecond), false},
		{"well before", at, at.Add(-time.Hour), false},
		{"at the deadline", at, at, true},
		{"after", at, at.Add(time.Nanosecond), true},
		{"long after", at, at.Add(time.Hour), true},
	} {
		if got := Passed(c.deadline, c.now); got != c.want {
			t.Errorf("%s: Passed(%v, %v) = %v, want %v", c.name, c.deadline, c.now, got, c.want)
		}
	}
}

func TestCounts(t *testing.T) {
	before := Counts()
	Count(Shard)
	Count(Shard)
	Count(Route)
	Count(Session)
	after := Counts()
	if len(after) != 3 || after[0].Stage != Shard || after[1].Stage != Route || after[2].Stage != Session {
		t.Fatalf("stages: %+v", after)
	}
	if d := after[Shard].N - before[Shard].N; d != 2 {
		t.Errorf("shard: +%d, want +2", d)
	}
	if d := after[Route].N - before[Route].N; d != 1 {
		t.Errorf("route: +%d, want +1", d)
	}
	if d := after[Session].N - before[Session].N; d != 1 {
		t.Errorf("session: +%d, want +1", d)
	}
	if Shard.String() != "shard" || Route.String() != "route" || Session.String() != "session" {
		t.Errorf("labels: %q %q %q", Shard, Route, Session)
	}
}
