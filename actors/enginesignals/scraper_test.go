package enginesignals

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// engine is an HTTP /metrics endpoint whose answer a test changes.
type engine struct {
	status atomic.Int32
	body   atomic.Value // string
	srv    *httptest.Server
}

func newEngine(t *testing.T, body string) *engine {
	e := &engine{}
	e.status.Store(http.StatusOK)
	e.body.Store(body)
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(e.status.Load()))
		fmt.Fprint(w, e.body.Load().(string))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func observe(s *Scraper, k messages.WorkerKey) Observation { return s.Snapshot()[k] }

func waitObs(t *testing.T, s *Scraper, k messages.WorkerKey, what string, ok func(Observation) bool) Observation {
	t.Helper()
	var o Observation
	eventually.True(t, what, func() (bool, string) {
		o = observe(s, k)
		return ok(o), fmt.Sprintf("%+v", o)
	})
	return o
}

func TestScraperFollowsAnEngine(t *testing.T) {
	e := newEngine(t, "vllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_waiting{engine=\"0\"} 1\n")
	s := NewScraper(Config{Interval: 2 * time.Millisecond, StaleAfter: 40 * time.Millisecond, Timeout: 30 * time.Millisecond, MaxBytes: 1 << 10})
	defer s.Close()
	k := messages.WorkerKey{Worker: 7}
	s.Set([]Target{{Key: k, URL: e.srv.URL + "/metrics", Engine: VLLM}})

	o := waitObs(t, s, k, "first scrape", func(o Observation) bool { return o.Seq > 0 })
	if o.Signals.Running != 2 || o.Signals.Waiting != 1 || o.Stale(o.At, s.Config().StaleAfter) {
		t.Fatalf("first observation %+v", o)
	}

	// The engine's answer changes: the next scrapes see it.
	e.body.Store("vllm:num_requests_running{engine=\"0\"} 9\n")
	waitObs(t, s, k, "new value", func(o Observation) bool { return o.Signals.Running == 9 })

	// It fails: counted by reason, and once past StaleAfter, stale once.
	e.status.Store(http.StatusServiceUnavailable)
	o = waitObs(t, s, k, "stale after failures", func(o Observation) bool { return o.StaleEvents == 1 })
	if o.FailuresOf(ReasonStatus) == 0 || !strings.Contains(o.LastError, "503") || !o.Stale(time.Now(), s.Config().StaleAfter) {
		t.Fatalf("failing engine: %+v", o)
	}
	// It comes back: fresh again, the stale episode counted once.
	e.status.Store(http.StatusOK)
	o = waitObs(t, s, k, "recovered", func(o Observation) bool { return o.LastError == "" && !o.Stale(time.Now(), s.Config().StaleAfter) })
	if o.StaleEvents != 1 {
		t.Fatalf("one stale episode counted %d times", o.StaleEvents)
	}

	// A body over the cap is refused and counted.
	e.body.Store(strings.Repeat("# padding\n", 200))
	waitObs(t, s, k, "too large counted", func(o Observation) bool { return o.FailuresOf(ReasonTooLarge) > 0 })

	// A target removed stops being scraped.
	s.Set(nil)
	if _, ok := s.Snapshot()[k]; ok {
		t.Fatal("removed target still observed")
	}
}

func TestScraperUnreachableIsStaleFromRegistration(t *testing.T) {
	e := newEngine(t, "")
	url := e.srv.URL + "/metrics"
	e.srv.Close() // nothing listens there any more
	s := NewScraper(Config{Interval: 2 * time.Millisecond, StaleAfter: 20 * time.Millisecond, Timeout: 10 * time.Millisecond})
	defer s.Close()
	k := messages.WorkerKey{Worker: 1, DpRank: 2}
	s.Set([]Target{{Key: k, URL: url, Engine: Auto}})
	o := waitObs(t, s, k, "stale without a success", func(o Observation) bool { return o.StaleEvents == 1 })
	if o.Seq != 0 || o.FailuresOf(ReasonUnreachable) == 0 || !o.At.IsZero() {
		t.Fatalf("unreachable engine: %+v", o)
	}
}
