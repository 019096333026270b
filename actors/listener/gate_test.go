package listener

import (
	"context"
	"testing"
	"time"
)

func TestGateHoldsTheSocketWhileTheWindowIsFull(t *testing.T) {
	g := newGate()
	if !g.wait(context.Background()) {
		t.Fatal("a new gate must be open")
	}
	g.set(false)
	g.set(false) // idempotent
	passed := make(chan bool, 1)
	go func() { passed <- g.wait(context.Background()) }()
	select {
	case <-passed:
		t.Fatal("a closed gate let the reader through")
	case <-time.After(50 * time.Millisecond):
	}
	g.set(true)
	if !<-passed {
		t.Fatal("opening the gate did not release the reader")
	}
	g.set(true) // idempotent
	g.set(false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if g.wait(ctx) {
		t.Fatal("a cancelled reader must not pass a closed gate")
	}
}
