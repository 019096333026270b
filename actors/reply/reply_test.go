package reply

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// echo answers every *ask into its channel, or to the sender without one.
type ask struct{ c Chan[int] }

func echo(ctx actor.Context) {
	if m, ok := ctx.Message().(*ask); ok {
		Respond(ctx, m.c, 7)
	}
}

// An actor answers into the channel the request carries, and a request
// without one through the future its asker made.
func TestRespondIntoChannelOrToSender(t *testing.T) {
	system := actor.NewActorSystem()
	pid := system.Root.Spawn(actor.PropsFromFunc(echo))
	t.Cleanup(func() { system.Root.Stop(pid) })
	c := Make[int](1)
	system.Root.Send(pid, &ask{c})
	if v, err := c.Wait(time.Second); err != nil || v != 7 {
		t.Errorf("into the channel: %v, %v", v, err)
	}
	if v, err := system.Root.RequestFuture(pid, &ask{}, time.Second).Result(); err != nil || v != 7 {
		t.Errorf("to the future: %v, %v", v, err)
	}
}

// A wait with no answer times out; the pooled timer it used delivers
// nothing stale to the next wait, which takes an answer already there
// without arming one.
func TestWaitTimesOutAndTimersComeBackClean(t *testing.T) {
	c := Make[int](2)
	if _, err := c.Wait(time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("empty channel: %v, want ErrTimeout", err)
	}
	for i := range 100 {
		c.Send(i)
		if v, err := c.Wait(time.Hour); err != nil || v != i {
			t.Fatalf("wait %d: %v, %v", i, v, err)
		}
	}
}

// Until shares one deadline among a fan-out's parts: the parts that came
// are taken, the missing one times out.
func TestUntilSharesADeadline(t *testing.T) {
	c := Make[int](3)
	c.Send(1)
	c.Send(2)
	var d Deadline
	defer d.Stop()
	sum := 0
	for range 2 {
		v, err := c.Until(&d, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if _, err := c.Until(&d, 10*time.Millisecond); !errors.Is(err, ErrTimeout) || sum != 3 {
		t.Errorf("third part: %v (sum %d), want ErrTimeout", err, sum)
	}
}

// Send never blocks: an answer beyond the room made is dropped.
func TestSendBeyondRoomDrops(t *testing.T) {
	c := Make[int](1)
	c.Send(1)
	c.Send(2)
	if v, _ := c.Wait(time.Second); v != 1 || len(c) != 0 {
		t.Errorf("got %d with %d left, want 1 and none", v, len(c))
	}
}
