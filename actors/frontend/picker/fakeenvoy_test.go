package picker

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// fakeEnvoy is the data plane's side of ext_proc: the generated client over
// a real gRPC connection, one stream per HTTP request, driven in the order
// Envoy's ext_proc filter drives it.
type fakeEnvoy struct {
	t    *testing.T
	conn *grpc.ClientConn
}

// startPicker serves a picker on a loopback port until the test ends and
// returns a fake Envoy connected to it.
func startPicker(t *testing.T, core Core, cfg Config) (*Server, *fakeEnvoy) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(core, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, &fakeEnvoy{t: t, conn: conn}
}

// httpStream is one HTTP request's ext_proc stream.
type httpStream struct {
	t      *testing.T
	c      extprocv3.ExternalProcessor_ProcessClient
	cancel context.CancelFunc
}

func (e *fakeEnvoy) open() *httpStream {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := extprocv3.NewExternalProcessorClient(e.conn).Process(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cancel)
	return &httpStream{t: e.t, c: c, cancel: cancel}
}

func (h *httpStream) send(msgs ...*extprocv3.ProcessingRequest) {
	h.t.Helper()
	for _, m := range msgs {
		if err := h.c.Send(m); err != nil {
			h.t.Fatalf("send: %v", err)
		}
	}
}

// expect receives len(want) responses and checks them (describe's form).
func (h *httpStream) expect(want ...string) []*extprocv3.ProcessingResponse {
	h.t.Helper()
	var got []string
	var rs []*extprocv3.ProcessingResponse
	for range want {
		r, err := h.c.Recv()
		if err != nil {
			h.t.Fatalf("recv after %q: %v (want %q)", got, err, want)
		}
		got = append(got, describe(r))
		rs = append(rs, r)
	}
	if !slices.Equal(got, want) {
		h.t.Fatalf("got\n\t%q\nwant\n\t%q", got, want)
	}
	return rs
}

// closed checks the picker ended the stream (after an immediate response).
func (h *httpStream) closed() {
	h.t.Helper()
	if r, err := h.c.Recv(); err == nil {
		h.t.Fatalf("stream still open: got %s", describe(r))
	}
}

// finish is Envoy closing the stream after the response completed.
func (h *httpStream) finish() {
	h.t.Helper()
	if err := h.c.CloseSend(); err != nil {
		h.t.Fatal(err)
	}
	h.closed()
}

// fakeCore books like the router: a ledger of request → endpoint, moved by
// Served, cleared by Done; every call is recorded.
type fakeCore struct {
	mu        sync.Mutex
	endpoints []string // ready endpoints, best first
	overload  bool
	booked    map[string]string
	prefilled map[string]bool
	calls     []string
	picks     []Request
}

func newFakeCore(endpoints ...string) *fakeCore {
	return &fakeCore{endpoints: endpoints, booked: map[string]string{}, prefilled: map[string]bool{}}
}

func (f *fakeCore) Pick(_ context.Context, r Request) (Choice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.picks = append(f.picks, r)
	if f.overload {
		return Choice{}, ErrOverloaded
	}
	var eps []string
	for _, e := range f.endpoints {
		if !r.Subsetted || slices.Contains(r.Subset, e) {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return Choice{}, ErrNoEndpoint
	}
	eps = eps[:min(len(eps), r.MaxEndpoints)]
	f.booked[r.ID] = eps[0]
	f.calls = append(f.calls, "pick "+eps[0])
	return Choice{Endpoints: eps}, nil
}

func (f *fakeCore) Served(_ context.Context, id, ep string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.booked[id] = ep
	f.calls = append(f.calls, "served "+ep)
	return nil
}

func (f *fakeCore) FirstByte(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prefilled[id] = true
	f.calls = append(f.calls, "first_byte")
	return nil
}

func (f *fakeCore) Done(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.booked, id)
	f.calls = append(f.calls, "done")
	return nil
}

func (f *fakeCore) snapshot() (calls []string, booked int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls), len(f.booked)
}

// waitFor polls cond until it holds or the deadline passes, reporting what
// it last saw.
func waitFor(t *testing.T, what string, cond func() (bool, any)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last saw %v", what, seen)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// callsAre waits until the core saw exactly want (bookkeeping runs on the
// server's goroutine, after the response that triggered it was sent).
func callsAre(t *testing.T, f *fakeCore, want ...string) {
	t.Helper()
	waitFor(t, "core calls "+strings.Join(want, ", "), func() (bool, any) {
		calls, _ := f.snapshot()
		return slices.Equal(calls, want), calls
	})
}
