package publisher

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/zmtpguard/zmtptest"
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
