package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A worker taken out of the fleet (POST /unregister, or Kubernetes
// discovery when its pod loses readiness) drains: no new request goes to
// it, while the answer it is streaming goes on to its end.
func TestProxyDrainsAnUnregisteredWorker(t *testing.T) {
	release := make(chan struct{})
	f := newFleet(t, 2, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-release:
		}
	}, Options{})
	resp, err := f.post(context.Background(), "/v1/completions", `{"model":"m","stream":true,"prompt":`+tokens(4, 8)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer := bufio.NewReader(resp.Body)
	if line, err := answer.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	busy := 0 // the engine streaming the held answer
	if f.https[1].Active() == 1 {
		busy = 1
	}
	if err := f.svc.Unregister(context.Background(), api.WorkerRef{InstanceID: messages.WorkerID(busy + 1), ModelName: "m"}); err != nil {
		t.Fatal(err)
	}
	close(release) // later answers are not held
	for i := range 4 {
		r, err := f.post(context.Background(), "/v1/completions", `{"model":"m","prompt":`+tokens(4, 8)+`}`) // its prefix is cached on the drained one
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("request %d while draining: %s", i, r.Status)
		}
	}
	rest, err := io.ReadAll(answer)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the held answer did not finish (%v): %q", err, rest)
	}
	waitFor(t, "the drained engine served just the held answer, the other the four new ones", func() (bool, any) {
		d, o := f.https[busy].Served(), f.https[1-busy].Served()
		return d == 1 && o == 4, fmt.Sprintf("drained %d, other %d", d, o)
	})
}
