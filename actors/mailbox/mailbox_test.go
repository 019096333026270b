package mailbox

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func depthOf(kind string) int64 {
	for _, d := range Depths() {
		if d.Kind == kind {
			return d.Len
		}
	}
	return -1
}

// A kind's depth counts the messages its actors have not finished handling.
func TestDepthCountsQueuedMessages(t *testing.T) {
	system := actor.NewActorSystem()
	release := make(chan struct{})
	taken := make(chan struct{}, 16)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(int); ok {
			taken <- struct{}{}
			<-release
		}
	}, Counted(Route)))
	defer system.Root.Stop(pid)
	for i := range 5 {
		system.Root.Send(pid, i)
	}
	<-taken // the first is being handled, four wait: all five are not handled yet
	if got := depthOf(Route); got != 5 {
		t.Fatalf("depth %d, want 5", got)
	}
	if got := depthOf(Index); got != 0 {
		t.Fatalf("another kind's depth %d, want 0", got)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for depthOf(Route) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("depth %d after the actor drained its mailbox", depthOf(Route))
		}
		time.Sleep(time.Millisecond)
	}
	if len(Depths()) != 6 {
		t.Fatalf("kinds %v", Depths())
	}
}

func TestUnknownKindPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("an unknown kind was accepted")
		}
	}()
	Counted("nope")
}
