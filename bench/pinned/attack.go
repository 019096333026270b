package pinned

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// generator is the load generator: vegeta's attacker, open loop.
type generator struct {
	bodies [][]byte
	// maxWorkers caps vegeta's concurrent requests (and connections):
	// past it a due request waits for a free worker, and the wait counts
	// in its latency.
	maxWorkers uint64
	timeout    time.Duration
}

// offer sends rate requests/s to url for warmup+d (open loop: each
// request is due at its scheduled time whatever the answers do), the
// bodies round robin, and measures the requests due after the warm-up.
func (g *generator) offer(ctx context.Context, url string, rate float64, warmup, d time.Duration) Stats {
	plan := newSchedule(rate, warmup+d)
	// A client of its own per point: the point opens its connections in
	// its warm-up and closes them at its end.
	// transport.go: net/http's Transport costs the load core ~90 µs a
	// request; the timeout is the connection's deadline (http.Client's
	// Timeout would add a context and a timer per request).
	tr := newLeanTransport(g.timeout)
	defer tr.CloseIdleConnections()
	atk := vegeta.NewAttacker(vegeta.Client(&http.Client{Transport: tr}),
		vegeta.Workers(min(64, g.maxWorkers)), vegeta.MaxWorkers(g.maxWorkers), vegeta.MaxBody(0))
	hdr := http.Header{"Content-Type": []string{"application/json"}}
	var next atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		t.Method, t.URL, t.Header = http.MethodPost, url, hdr
		t.Body = g.bodies[(next.Add(1)-1)%uint64(len(g.bodies))]
		return nil
	}
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	samples := make([]sample, 0, plan.count)
	for res := range atk.Attack(targeter, plan, 0, "") {
		samples = append(samples, sample{Seq: res.Seq, Began: res.Timestamp, Ended: res.Timestamp.Add(res.Latency),
			OK: res.Code == http.StatusOK && res.Error == "", Err: errorClass(res.Code, res.Error)})
	}
	return summarize(plan, samples, warmup)
}

// errorClass names why a request failed, in a few classes (a client
// error's text carries the URL and the ports).
func errorClass(code uint16, err string) string {
	switch {
	case code != 0 && code != http.StatusOK:
		return "status " + strconv.Itoa(int(code))
	case strings.Contains(err, "Client.Timeout") || strings.Contains(err, "deadline exceeded") || strings.Contains(err, "i/o timeout"):
		return "timeout"
	case strings.Contains(err, "connection reset"):
		return "connection reset"
	case strings.Contains(err, "connection refused"):
		return "connection refused"
	case strings.Contains(err, "EOF"):
		return "connection closed"
	}
	return "other"
}
