package admission

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestOver(t *testing.T) {
	for _, c := range []struct {
		n, max int64
		want   bool
	}{
		{0, 0, false}, {1 << 40, 0, false}, // no cap
		{0, 1, false}, {1, 1, true},
		{99, 100, false}, {100, 100, true}, {101, 100, true},
	} {
		if got := Over(c.n, c.max); got != c.want {
			t.Errorf("Over(%d in flight, max %d) = %v, want %v", c.n, c.max, got, c.want)
		}
	}
}

func TestLogDue(t *testing.T) {
	ten := int64(logEvery)
	for _, c := range []struct {
		last, now int64
		want      bool
	}{
		{0, 5, true}, // the first refusal
		{100, 100, false},
		{100, 100 + ten - 1, false},
		{100, 100 + ten, true},
		{100, 100 + 3*ten, true},
	} {
		if got := logDue(c.last, c.now); got != c.want {
			t.Errorf("logDue(%d, %d) = %v, want %v", c.last, c.now, got, c.want)
		}
	}
}

// A gate admits up to its cap, refuses (counts, logs) beyond it, and admits
// again once a request leaves; many goroutines never get more than the cap
// in.
func TestGate(t *testing.T) {
	var logs bytes.Buffer
	g := New(2, slog.New(slog.NewTextHandler(&logs, nil)))
	if !g.Enter() || !g.Enter() {
		t.Fatal("refused under the cap")
	}
	if g.Enter() {
		t.Fatal("admitted a third request over a cap of 2")
	}
	if g.InFlight() != 2 || g.Refused() != 1 {
		t.Errorf("in flight %d refused %d, want 2 and 1", g.InFlight(), g.Refused())
	}
	if !strings.Contains(logs.String(), "over capacity") || !strings.Contains(logs.String(), "refused=1") {
		t.Errorf("the first refusal is not logged: %q", logs.String())
	}
	g.Leave()
	if !g.Enter() {
		t.Fatal("refused after a request left")
	}
	g.Leave()
	g.Leave()

	var wg sync.WaitGroup
	var mu sync.Mutex
	peak, in := 0, 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !g.Enter() {
				return
			}
			mu.Lock()
			in++
			peak = max(peak, in)
			mu.Unlock()
			mu.Lock()
			in--
			mu.Unlock()
			g.Leave()
		}()
	}
	wg.Wait()
	if peak > 2 || g.InFlight() != 0 {
		t.Errorf("peak %d in (cap 2), %d left in flight", peak, g.InFlight())
	}
	var m bytes.Buffer
	if err := g.WriteMetrics(&m); err != nil || !strings.Contains(m.String(), "kvrouter_route_admission_max_in_flight 2\n") {
		t.Errorf("metrics %q (%v)", m.String(), err)
	}
}

// A nil gate and a gate without a cap admit everything.
func TestNoCap(t *testing.T) {
	var nilGate *Gate
	open := New(0, nil)
	for range 1000 {
		if !nilGate.Enter() || !open.Enter() {
			t.Fatal("refused without a cap")
		}
	}
	nilGate.Leave()
	if open.InFlight() != 1000 || open.Refused() != 0 || nilGate.Max() != 0 {
		t.Errorf("in flight %d refused %d", open.InFlight(), open.Refused())
	}
}
