package listener_test

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/zmtpguard"
	"github.com/kvrouter/kvrouter/actors/zmtpguard/zmtptest"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// zmtpPub is a hostile "engine": it speaks ZMTP 3.0 as a PUB (greeting,
// READY) and then declares a frame of a terabyte. zmq4 alone allocates it
// and the process dies ("out of memory"); through the guarded transport
// (actors/zmtpguard) the connection is closed and counted.
func zmtpPub(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write(zmtptest.Greeting())
				_, _ = c.Read(make([]byte, 64))
				_, _ = c.Write(zmtptest.Ready("PUB"))
				_, _ = c.Read(make([]byte, 64))               // the subscriber's READY
				_, _ = c.Write(zmtptest.LongHeader(0, 1<<40)) // a frame of 1 TiB
				_, _ = io.Copy(io.Discard, c)                 // until the subscriber hangs up
			}()
		}
	}()
	return "tcp://" + ln.Addr().String()
}

func TestAFrameOfATerabyteIsRefused(t *testing.T) {
	system := actor.NewActorSystem()
	next := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	props, err := listener.Props(listener.Config{Stream: messages.StreamID{Worker: 1}, Endpoint: zmtpPub(t), Next: next, Silence: -1})
	if err != nil {
		t.Fatal(err)
	}
	pid := system.Root.Spawn(props)
	defer system.Root.Stop(pid)
	eventually.True(t, "the refusal counted", func() (bool, string) {
		res, err := system.Root.RequestFuture(pid, &listener.StatsRequest{}, time.Second).Result()
		if err != nil {
			return false, err.Error()
		}
		for why, n := range res.(*listener.Stats).BadFrames {
			if strings.Contains(why, zmtpguard.ErrMessageTooLarge.Error()) && n > 0 {
				return true, "" // refused, counted, and the process is alive
			}
		}
		return false, fmt.Sprint("bad frames ", res.(*listener.Stats).BadFrames)
	})
}
