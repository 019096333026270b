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

// late answers a request only once released, and says when it has.
type late struct {
	release  chan struct{}
	answered chan struct{}
}

func (l *late) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*ask); ok {
		<-l.release
		ctx.Respond(7)
		close(l.answered)
	}
}

// A future that timed out reports the timeout, also after the reply
// came; one answered in time gives its answer. (The race FutureResult
// avoids needs a reply whose delivery began before the timeout removed
// the future from the registry and whose write lands after the waiter
// woke: a window no test can hold open from outside protoactor.)
func TestFutureResultAfterALateReply(t *testing.T) {
	system := actor.NewActorSystem()
	l := &late{release: make(chan struct{}), answered: make(chan struct{})}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return l }))
	t.Cleanup(func() { system.Root.Stop(pid) })
	f := system.Root.RequestFuture(pid, &ask{}, time.Millisecond)
	if v, err := FutureResult(f); !errors.Is(err, actor.ErrTimeout) || v != nil {
		t.Errorf("timed out: %v, %v; want nil, %v", v, err, actor.ErrTimeout)
	}
	close(l.release)
	<-l.answered
	if v, err := FutureResult(f); !errors.Is(err, actor.ErrTimeout) || v != nil {
		t.Errorf("after the late reply: %v, %v; want nil, %v", v, err, actor.ErrTimeout)
	}
	e := system.Root.Spawn(actor.PropsFromFunc(echo))
	t.Cleanup(func() { system.Root.Stop(e) })
	if v, err := FutureResult(system.Root.RequestFuture(e, &ask{}, time.Second)); err != nil || v != 7 {
		t.Errorf("answered in time: %v, %v; want 7, nil", v, err)
	}
}
