package simengine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

// prefillSurface is an engine of block size 4 whose surface models
// prefills at rate tokens/s with a 5 ms publish interval.
func prefillSurface(t *testing.T, rate float64) (*Engine, *HTTPServer, string) {
	t.Helper()
	eng, err := New(Options{Endpoint: "tcp://127.0.0.1:0", BlockSize: 4, CapacityBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	srv, err := eng.ServeHTTP("127.0.0.1:0", HTTPOptions{CompletionTokens: 2,
		Prefill: &PrefillOptions{TokensPerSecond: rate, PublishInterval: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return eng, srv, "http://" + srv.ServingEndpoint() + "/v1/completions"
}

// ids is a completions body of n token ids from first.
func ids(first, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, first+i)
	}
	return `{"model":"m","stream":true,"prompt":[` + b.String() + `]}`
}

// While a request's prefill runs, its blocks are in the engine's cache
// but no event about them has left the engine, and no token has reached
// the client: at 1 token/s a 64-token prompt prefills for a minute.
func TestPrefillHoldsTheEventsUntilItEnds(t *testing.T) {
	eng, srv, url := prefillSurface(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(ids(1, 64)))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	eventually.True(t, "the request is served", func() (bool, string) {
		st := eng.Stats()
		return st.Blocks == 16, fmt.Sprintf("%+v", st)
	})
	if st, ps := eng.Stats(), srv.PrefillStats(); st.SentBlocks != 0 || st.NextSeq != 0 || ps.Batches != 0 {
		t.Fatalf("during the prefill: engine %+v, prefill %+v; want nothing published", st, ps)
	}
	select {
	case err := <-answered:
		t.Fatalf("the client had an answer during the prefill (%v)", err)
	default:
	}
	cancel()
	<-answered
}

// At 3,200 tokens/s a 64-token prompt's first token comes after its 20 ms
// prefill, its events 5 ms after that, in one batch of its 16 blocks; so
// do a second prompt's, served while the first prefills.
func TestPrefillPublishesAtItsEnd(t *testing.T) {
	eng, srv, url := prefillSurface(t, 3200)
	stream := func(body string, ttft chan<- time.Duration) {
		t0 := time.Now()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			ttft <- -1
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, 1)
		_, _ = resp.Body.Read(buf) // the first byte streams with the first token
		ttft <- time.Since(t0)
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	a, b := make(chan time.Duration, 1), make(chan time.Duration, 1)
	go stream(ids(1, 64), a)
	eventually.True(t, "the first request is served", func() (bool, string) {
		return eng.Stats().Blocks == 16, fmt.Sprintf("%+v", eng.Stats())
	})
	go stream(ids(1000, 64), b)
	first, second := <-a, <-b
	if first < 20*time.Millisecond || second < 20*time.Millisecond {
		t.Errorf("first tokens after %v and %v, want each after a 20 ms prefill at least", first, second)
	}
	eventually.True(t, "both prefills published", func() (bool, string) {
		st, ps := eng.Stats(), srv.PrefillStats()
		return st.SentBlocks == 32 && ps.Batches == 2, fmt.Sprintf("engine %+v, prefill %+v", st, ps)
	})
	if ps := srv.PrefillStats(); ps.Early != 0 || ps.MinLag < 5*time.Millisecond {
		t.Errorf("prefill %+v: want no batch before its prefill's end, each 5 ms after it at least", ps)
	}
}
