package publisher

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/go-zeromq/zmq4"
	"github.com/kvrouter/kvrouter/actors/zmtpguard/zmtptest"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// The PUB reads what its subscribers send: one declaring a terabyte has its
// connection closed (by the guarded transport), and the process lives on.
func TestASubscriberDeclaringATerabyteIsCutOff(t *testing.T) {
	sock := t.TempDir() + "/events.sock"
	props, err := Props("ipc://"+sock, "")
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem()
	pid := system.Root.Spawn(props)
	defer system.Root.Stop(pid)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := append(append(zmtptest.Greeting(), zmtptest.Ready("SUB")...), zmtptest.LongHeader(0, 1<<40)...)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("connection not closed (read %d bytes, then %v)", n, err)
	}
}

func TestUnguardedTransportsAreRefused(t *testing.T) {
	if _, err := Props("udp://127.0.0.1:5557", ""); err == nil || !strings.Contains(err.Error(), `transport "udp" is not supported`) {
		t.Fatalf("Props(udp://) = %v, want the transport refused", err)
	}
}

// A subscriber's subscription shows in Stats.Topics once it reached the
// PUB: what a test waits for before publishing (ZeroMQ's slow joiner).
func TestStatsListTheSubscribersTopics(t *testing.T) {
	endpoint := "ipc://" + t.TempDir() + "/events.sock"
	props, err := Props(endpoint, "")
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem()
	pid := system.Root.Spawn(props)
	defer system.Root.Stop(pid)
	stats := func() *Stats {
		res, err := system.Root.RequestFuture(pid, &StatsRequest{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*Stats)
	}
	if got := stats().Topics; len(got) != 0 {
		t.Fatalf("topics %v before any subscriber", got)
	}
	sub := zmq4.NewSub(context.Background())
	defer sub.Close()
	if err := sub.Dial(endpoint); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kvrouter."); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the subscription listed", func() (bool, string) {
		got := stats().Topics
		return slices.Equal(got, []string{"kvrouter."}), fmt.Sprint(got)
	})
}
