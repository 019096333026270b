package mailbox

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
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
	eventually.True(t, "depth 0 once the actor drained its mailbox", func() (bool, string) {
		return depthOf(Route) == 0, fmt.Sprint("depth ", depthOf(Route))
	})
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

// Batches sit just below protoactor's default priority: requests pass them
// in a priority mailbox, and nothing else does.
func TestBackgroundPriorityIsJustBelowTheDefault(t *testing.T) {
	if messages.BackgroundPriority != actor.DefaultPriority-1 {
		t.Fatalf("BackgroundPriority %d, default %d", messages.BackgroundPriority, actor.DefaultPriority)
	}
}

// In a CountedPriority mailbox a request passes the background messages
// queued before it; background messages keep their order.
func TestReadsPassQueuedBatches(t *testing.T) {
	system := actor.NewActorSystem()
	release := make(chan struct{})
	var order []string
	done := make(chan struct{})
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string:
			<-release
		case *messages.RouterEventBatch:
			order = append(order, "batch")
			if len(order) == 3 {
				close(done)
			}
		case int:
			order = append(order, "read")
			ctx.Respond(m)
		}
	}, CountedPriority(Index)))
	defer system.Root.Stop(pid)
	system.Root.Send(pid, "block") // the actor waits while the rest queues
	system.Root.Send(pid, &messages.RouterEventBatch{})
	system.Root.Send(pid, &messages.RouterEventBatch{})
	f := system.Root.RequestFuture(pid, 1, 5*time.Second)
	// The read is queued behind the batches (the blocked message counts
	// until it is handled: four in all).
	eventually.True(t, "the read queued", func() (bool, string) {
		return depthOf(Index) == 4, fmt.Sprint("depth ", depthOf(Index))
	})
	close(release)
	if _, err := f.Result(); err != nil {
		t.Fatal(err)
	}
	<-done
	if want := []string{"read", "batch", "batch"}; !slices.Equal(order, want) {
		t.Fatalf("handled %v, want %v", order, want)
	}
}
