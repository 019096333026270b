package sessions

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// fakeClock is a clock the test moves; the actor reads it on its goroutine.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func spawn(t *testing.T, cfg ActorConfig) (*actor.RootContext, *actor.PID) {
	t.Helper()
	root := actor.NewActorSystem().Root
	pid := root.Spawn(Props(cfg))
	t.Cleanup(func() { _ = root.StopFuture(pid).Wait() })
	return root, pid
}

func ask[T any](t *testing.T, root *actor.RootContext, pid *actor.PID, msg any) T {
	t.Helper()
	res, err := root.RequestFuture(pid, msg, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := res.(T)
	if !ok {
		t.Fatalf("answer %T", res)
	}
	return v
}

func batch(clear []messages.WorkerKey, evs ...messages.RouterEvent) *messages.RouterEventBatch {
	return &messages.RouterEventBatch{Clear: clear, Events: evs}
}

// A batch's clears apply before its events; the actor answers Get (with
// and without chains), Credit (candidates only), Forget and DropWorker.
func TestActorFollowsBatchesAndAnswers(t *testing.T) {
	clock := &fakeClock{now: t0}
	root, pid := spawn(t, ActorConfig{Now: clock.Now, ExpireEvery: -1})
	root.Send(pid, batch(nil, st(1, 0, "s", noParent, 10, 11, 12), st(2, 0, "s", noParent, 20)))
	ask[*Stats](t, root, pid, &StatsRequest{}) // applied at t0
	clock.advance(time.Second)
	// Worker 1 resyncs: its old lineage goes, the batch's new store stays.
	root.Send(pid, batch([]messages.WorkerKey{wk(1, 0)}, st(1, 0, "s", noParent, 30, 31)))

	got := ask[*GetReply](t, root, pid, &GetRequest{ID: "s", Chain: true})
	if !got.Found || len(got.Session.Holders) != 2 {
		t.Fatalf("get: %+v", got)
	}
	h := got.Session.Holders[0] // newest first
	if h.Key != wk(1, 0) || h.Depth != 2 || h.Newest != 31 || !h.Updated.Equal(t0.Add(time.Second)) ||
		!slices.Equal(h.Chain, []messages.ExternalHash{30, 31}) {
		t.Errorf("worker 1 after the clear: %+v", h)
	}
	if !got.Session.LastSeen.Equal(t0.Add(time.Second)) {
		t.Errorf("last seen %v", got.Session.LastSeen)
	}
	plain := ask[*GetReply](t, root, pid, &GetRequest{ID: "s"})
	for _, h := range plain.Session.Holders {
		if h.Chain != nil {
			t.Errorf("chain without asking: %+v", h)
		}
	}

	both := []routing.Candidate{{Key: wk(1, 0)}, {Key: wk(2, 0)}}
	cr := ask[*CreditReply](t, root, pid, &CreditRequest{ID: "s", Weight: 1, Candidates: both})
	if !slices.Equal(cr.Bonus, []Bonus{{Key: wk(1, 0), Blocks: 2}}) {
		t.Errorf("credit: %+v", cr.Bonus)
	}
	cr = ask[*CreditReply](t, root, pid, &CreditRequest{ID: "s", Weight: 1, Candidates: both[1:]})
	if !slices.Equal(cr.Bonus, []Bonus{{Key: wk(2, 0), Blocks: 1}}) {
		t.Errorf("credit among worker 2 only: %+v", cr.Bonus)
	}
	if cr := ask[*CreditReply](t, root, pid, &CreditRequest{ID: "other", Weight: 1, Candidates: both}); len(cr.Bonus) != 0 {
		t.Errorf("unknown session credited: %+v", cr.Bonus)
	}

	root.Send(pid, &DropWorker{Worker: 1})
	got = ask[*GetReply](t, root, pid, &GetRequest{ID: "s"})
	if len(got.Session.Holders) != 1 || got.Session.Holders[0].Key != wk(2, 0) {
		t.Errorf("after dropping worker 1: %+v", got.Session.Holders)
	}
	if r := ask[*ForgetReply](t, root, pid, &ForgetRequest{ID: "s"}); !r.Found {
		t.Error("forget: not found")
	}
	if r := ask[*ForgetReply](t, root, pid, &ForgetRequest{ID: "s"}); r.Found {
		t.Error("second forget found it")
	}
	if g := ask[*GetReply](t, root, pid, &GetRequest{ID: "s"}); g.Found {
		t.Errorf("forgotten session still there: %+v", g)
	}
	st := ask[*Stats](t, root, pid, &StatsRequest{})
	if st.Sessions != 0 || st.Events != 4 || st.Reasons[ReasonCleared] != 2 {
		t.Errorf("stats: %+v", st)
	}
}

// The timer drops idle sessions without any event arriving.
func TestActorExpiresOnItsTimer(t *testing.T) {
	clock := &fakeClock{now: t0}
	root, pid := spawn(t, ActorConfig{Index: Config{IdleTTL: time.Minute}, Now: clock.Now, ExpireEvery: 5 * time.Millisecond})
	// The clock is read when the actor applies a batch: a request after
	// each send waits for that.
	root.Send(pid, batch(nil, st(1, 0, "old", noParent, 1)))
	ask[*Stats](t, root, pid, &StatsRequest{})
	clock.advance(30 * time.Second)
	root.Send(pid, batch(nil, st(1, 0, "new", noParent, 2)))
	ask[*Stats](t, root, pid, &StatsRequest{})
	clock.advance(45 * time.Second) // "old" idle 75 s, "new" 45 s
	eventually.True(t, "the old session expired", func() (bool, string) {
		s := ask[*Stats](t, root, pid, &StatsRequest{})
		return s.Reasons[ReasonExpired] == 1 && s.Sessions == 1, fmt.Sprintf("%+v", s)
	})
	if g := ask[*GetReply](t, root, pid, &GetRequest{ID: "new"}); !g.Found {
		t.Error("the session stored to 45 s ago expired too")
	}
}

// A credit request taken past its deadline (by the actor's clock) is
// answered ErrExpired without a bonus and counted; one before its
// deadline is answered as ever.
func TestActorShedsExpiredCredit(t *testing.T) {
	clock := &fakeClock{now: t0}
	root, pid := spawn(t, ActorConfig{Now: clock.Now, ExpireEvery: -1})
	root.Send(pid, batch(nil, st(1, 0, "s", noParent, 10, 11)))
	cands := []routing.Candidate{{Key: wk(1, 0)}}
	before := expiry.Counts()[expiry.Session].N
	late := ask[*CreditReply](t, root, pid, &CreditRequest{ID: "s", Weight: 1, Candidates: cands, Deadline: t0})
	if !errors.Is(late.Err, expiry.ErrExpired) || late.Bonus != nil {
		t.Errorf("at its deadline: %+v, want ErrExpired and no bonus", late)
	}
	if n := expiry.Counts()[expiry.Session].N - before; n != 1 {
		t.Errorf("expired counted %d times, want 1", n)
	}
	due := ask[*CreditReply](t, root, pid, &CreditRequest{ID: "s", Weight: 1, Candidates: cands, Deadline: t0.Add(time.Millisecond)})
	if due.Err != nil || !slices.Equal(due.Bonus, []Bonus{{Key: wk(1, 0), Blocks: 2}}) {
		t.Errorf("before its deadline: %+v", due)
	}
}

// syncBuffer is a log sink the actor writes to on its goroutine while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// TestBoundPastItsCapIsLogged: a MaxSessions or MaxDepth above its cap is
// lowered to it (Config shows the cap) and reported by Check, which the
// actor logs once when it starts; bounds within the caps log nothing.
func TestBoundPastItsCapIsLogged(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MaxSessions: MaxSessionsCap + 1}, "MaxSessions 1048577 is above its cap 1048576"},
		{Config{MaxDepth: 1 << 20}, "MaxDepth 1048576 is above its cap 262144"},
		{Config{MaxSessions: MaxSessionsCap, MaxDepth: MaxDepthCap}, ""},
	} {
		got := New(c.cfg).Config()
		if got.MaxSessions > MaxSessionsCap || got.MaxDepth > MaxDepthCap {
			t.Errorf("%+v: the index uses %d sessions, depth %d", c.cfg, got.MaxSessions, got.MaxDepth)
		}
		if err := c.cfg.Check(); (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Check = %v, want %q", c.cfg, err, c.want)
		}
		var logs syncBuffer
		system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(&logs, nil))
		}))
		pid := system.Root.Spawn(Props(ActorConfig{Index: c.cfg}))
		ask[*Stats](t, system.Root, pid, &StatsRequest{}) // Started is handled first
		_ = system.Root.StopFuture(pid).Wait()
		system.Shutdown()
		if n := strings.Count(logs.String(), "lowered to its cap"); n != min(len(c.want), 1) || !strings.Contains(logs.String(), c.want) {
			t.Errorf("%+v: %d warnings, want them to say %q:\n%s", c.cfg, n, c.want, logs.String())
		}
	}
}
