package listener

import (
	"context"
	"testing"
	"time"
)

func TestCreditsBoundWhatTheSocketHandsOver(t *testing.T) {
	c := newCredits(2)
	ctx := context.Background()
	if !c.take(ctx) || !c.take(ctx) {
		t.Fatal("a window of 2 must give 2 credits")
	}
	passed := make(chan bool, 1)
	go func() { passed <- c.take(ctx) }()
	select {
	case <-passed:
		t.Fatal("a third batch passed a window of 2")
	case <-time.After(50 * time.Millisecond):
	}
	c.give(1)
	if !<-passed {
		t.Fatal("a returned credit did not release the reader")
	}
	c.give(5) // more than taken: only what was taken comes back
	for range 2 {
		if !c.take(ctx) {
			t.Fatal("the returned credits are not there")
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if c.take(cancelled) {
		t.Fatal("a cancelled reader must not pass a full window")
	}
}
