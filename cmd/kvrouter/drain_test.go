package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/eventually"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestServeDrainsOnSIGTERM runs kvrouter serve with the picker and the
// proxy in this process and sends it SIGTERM: readiness goes NOT_SERVING
// at once on the plaintext health port and on /readyz, while the ext_proc
// stream and the proxied answer open before the signal complete and new
// ones are still served; a second signal ends the drain early (as
// --drain-timeout would), the stream still open is cut and its booking
// freed before serve returns.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	release := make(chan struct{}) // holds proxied answers after their first token until the signal
	hs, err := eng.ServeHTTP("127.0.0.1:0", simengine.HTTPOptions{CompletionTokens: 3, Hold: func(ctx context.Context) {
		select {
		case <-release:
		case <-ctx.Done():
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	serving := hs.ServingEndpoint()
	api, epp, health, proxy := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	s := serveInProcess(t, "--http", api, "--block-size", "4", "--drain-timeout", "10m",
		"--worker", "1="+eng.Endpoint()+",replay="+eng.ReplayEndpoint()+",serving="+serving,
		"--epp-listen", epp, "--epp-health-listen", health, "--proxy-listen", proxy)
	hconn, err := grpc.NewClient(health, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer hconn.Close()
	hc := healthpb.NewHealthClient(hconn)
	healthIs := func(what string, want healthpb.HealthCheckResponse_ServingStatus, heartbeat bool) {
		t.Helper()
		eventually.True(t, what, func() (bool, string) {
			if heartbeat {
				_ = eng.Publish() // the stream is synced once its first batch is in
			}
			r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
			return err == nil && r.GetStatus() == want, fmt.Sprint(r.GetStatus(), err)
		})
	}
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + api + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	healthIs("health port SERVING once the index synced", healthpb.HealthCheckResponse_SERVING, true)
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: %d %s", code, body)
	}

	envoy := et.DialTLS(t, epp)
	body := `{"model":"default","prompt":[1,2,3,4,5,6,7,8]}`
	routed := fmt.Sprintf("req_headers dest=%s len=%d clear meta=%s", serving, len(body), serving)
	open := func() *et.Stream {
		t.Helper()
		h := envoy.Open()
		h.Send(et.RequestHeaders(&et.FullDuplex, "/v1/completions", false, nil), et.RequestBody(body, true))
		h.Expect(routed, fmt.Sprintf("req_body streamed=%d eos", len(body)))
		return h
	}
	before := open()
	// A proxied answer streaming, held after its first token.
	resp, err := http.Post("http://"+proxy+"/v1/completions", "application/json", strings.NewReader(`{"model":"default","prompt":[9,10,11,12],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer := bufio.NewReader(resp.Body)
	if line, err := answer.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("proxied answer's first line %q (%v)", line, err)
	}

	s.signal(t)
	healthIs("health port NOT_SERVING after SIGTERM", healthpb.HealthCheckResponse_NOT_SERVING, false)
	eventually.True(t, "/readyz 503 draining", func() (bool, string) {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "draining"), fmt.Sprint(code, body)
	})
	// The stream open at the signal completes.
	before.Send(et.ResponseHeaders("200", serving, false))
	before.Expect("resp_headers")
	before.Send(et.ResponseBody("data: [DONE]\n\n", true, serving))
	before.Expect("resp_body streamed=14 eos")
	before.Finish()
	close(release)
	rest, err := io.ReadAll(answer)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the proxied answer open at the signal did not finish (%v):\n%s", err, rest)
	}
	// On a new connection: draining, serve closes the one the first answer
	// came on once it ends, and a POST sent on it meanwhile is reset (the
	// client's keep-alive race, not retried for a POST).
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp2, err := fresh.Post("http://"+proxy+"/v1/completions", "application/json", strings.NewReader(`{"model":"default","prompt":[9,10,11,12]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("a proxied request while draining: %s", resp2.Status)
	}
	// A new one is still served, and stays open past the stop.
	after := open()
	after.Send(et.ResponseHeaders("200", serving, false))
	after.Expect("resp_headers")

	// The answers ended on the client's side free their bookings when
	// their handlers return, a moment later: wait until only this one is
	// open, so the stop line's count is this stream alone.
	eventually.True(t, "one booking open before the drain's end", func() (bool, string) {
		lines := scrapeLines(t, "http://"+api+"/metrics", "kvrouter_request_path_in_flight{")
		open := 0
		for _, l := range lines {
			n, _ := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:])
			open += n
		}
		return open == 1, strings.Join(lines, "; ")
	})
	s.signal(t) // the drain's end, early
	s.exited(t)
	after.Closed()
	var line string
	for _, l := range strings.Split(s.log.String(), "\n") {
		if strings.Contains(l, `msg="kvrouter serve stopped"`) {
			line = l
		}
	}
	if field(line, "open_at_stop") != "1" || field(line, "open_after_stop") != "0" {
		t.Fatalf("stop line %q: want the one open request cut and freed (open_at_stop=1 open_after_stop=0)", line)
	}
}

// inProcess is a kvrouter serve running in the test's process.
type inProcess struct {
	log     *lockedBuffer
	done    chan int
	sigs    chan os.Signal
	stopped bool
}

// serveInProcess runs kvrouter serve with args until the test ends (then
// two SIGTERMs stop it). Its log is shown if the test fails. Its signals
// are its own, sent on the channel serve reads, not to the process: a
// process signal could reach another test's serve. Serve runs with
// --drain-timeout 0 unless args set it.
func serveInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	s := &inProcess{log: &lockedBuffer{}, done: make(chan int, 1), sigs: make(chan os.Signal, 2)}
	args = append([]string{"--drain-timeout", "0"}, args...) // a later --drain-timeout wins
	own := func() (<-chan os.Signal, func()) { return s.sigs, func() {} }
	go func() { s.done <- serve(args, io.Discard, s.log, own) }()
	t.Cleanup(func() {
		if !s.stopped {
			s.signal(t)
			s.signal(t)
			<-s.done
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", tail(s.log.String(), 4096))
		}
	})
	return s
}

// signal tells serve it got SIGTERM.
func (s *inProcess) signal(t *testing.T) {
	t.Helper()
	select {
	case s.sigs <- syscall.SIGTERM:
	default: // two unread signals already stop it
	}
}

// exited waits for serve to return and checks it exited 0.
func (s *inProcess) exited(t *testing.T) {
	t.Helper()
	select {
	case code := <-s.done:
		s.stopped = true
		if code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	case <-time.After(time.Minute): // a guard against a hang, not a wait
		t.Fatal("serve did not stop")
	}
}

// TestStopWaitsForCutHandlers checks stop's last wait: a request still
// open at the stop is cut after picker.StopGrace, and stop returns only
// after its handler has returned (there it frees its booking), however
// slow that handler's clean-up is.
func TestStopWaitsForCutHandlers(t *testing.T) {
	started := make(chan struct{})
	var finished atomic.Bool
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done() // cut by the stop
		for range 10000 {
			runtime.Gosched() // a slow clean-up: without the wait, stop returns first
		}
		finished.Store(true)
	})}
	s := &stopper{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), stopEPP: func() {}}
	s.track(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	s.stop()
	if !finished.Load() {
		t.Fatal("stop returned while the cut request's handler was still running")
	}
}

// TestProcessSignalsDeliversSIGTERM checks the channel serve reads outside
// tests: a SIGTERM sent to the process arrives on it.
func TestProcessSignalsDeliversSIGTERM(t *testing.T) {
	sigs, release := processSignals()
	defer release()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := <-sigs; got != syscall.SIGTERM {
		t.Fatalf("got %v, want SIGTERM", got)
	}
}
