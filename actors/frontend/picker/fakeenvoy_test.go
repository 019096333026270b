package picker

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvrouter/kvrouter/actors/certs"
	"github.com/kvrouter/kvrouter/actors/frontend/frontendtest"
	et "github.com/kvrouter/kvrouter/actors/frontend/picker/envoytest"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// startPicker serves a picker over TLS (a self-signed certificate, as
// kvrouter serve by default) on a loopback port until the test ends and
// returns a fake Envoy connected to it as the gateways connect.
func startPicker(t *testing.T, core Core, cfg Config) (*Server, *et.Envoy) {
	t.Helper()
	if cfg.TLS == nil {
		src, err := certs.NewSource(certs.SourceConfig{Name: "picker"})
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = certs.ServerConfig(src, certs.Policy{}, []string{"h2"})
	}
	s, addr := servePicker(t, core, cfg)
	return s, et.DialTLS(t, addr)
}

// servePicker serves a picker configured by cfg on a loopback port until
// the test ends.
func servePicker(t *testing.T, core Core, cfg Config) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(core, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, lis.Addr().String()
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
		if !r.Subsetted || requestpath.InSubset(r.Subset, e) {
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
	frontendtest.WaitFor(t, what, cond)
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
