package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/messages/api"
)

// Transport names.
const (
	TransportInProcess = "in-process"
	TransportHTTP      = "http"
)

// transport sends request i to host h and returns the chosen worker's
// index.
type transport interface {
	route(ctx context.Context, h, i int, id, session string) (int, error)
}

// inProcess calls the hosts' services directly: hashing, index actor,
// route actor.
type inProcess struct {
	svcs []*service.Service
	reqs []Request
}

func (t *inProcess) route(ctx context.Context, h, i int, id, session string) (int, error) {
	res, err := t.svcs[h].Route(ctx, api.RouteRequest{TokenIDs: t.reqs[i].Tokens, ModelName: benchModel, RequestID: id, SessionID: session})
	return int(res.WorkerID) - 1, err
}

// overHTTP posts to the hosts' /route over keep-alive connections; the
// token lists are JSON-encoded ahead of time so the client spends little
// CPU.
type overHTTP struct {
	client *http.Client
	urls   []string
	tokens [][]byte
}

func newOverHTTP(urls []string, reqs []Request, conns int) (*overHTTP, error) {
	t := &overHTTP{tokens: make([][]byte, len(reqs)),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}}
	for _, u := range urls {
		t.urls = append(t.urls, u+"/route")
	}
	for i, r := range reqs {
		b, err := json.Marshal(r.Tokens)
		if err != nil {
			return nil, err
		}
		t.tokens[i] = b
	}
	return t, nil
}

func (t *overHTTP) route(ctx context.Context, h, i int, id, session string) (int, error) {
	body := make([]byte, 0, len(t.tokens[i])+128)
	body = append(body, `{"model_name":"`+benchModel+`","request_id":`...)
	body = strconv.AppendQuote(body, id)
	if session != "" {
		body = append(body, `,"session_id":`...)
		body = strconv.AppendQuote(body, session)
	}
	body = append(body, `,"token_ids":`...)
	body = append(append(body, t.tokens[i]...), '}')
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.urls[h], bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return 0, fmt.Errorf("/route: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	var out struct {
		WorkerID uint64 `json:"worker_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	_, _ = io.Copy(io.Discard, resp.Body)
	return int(out.WorkerID) - 1, err
}

// sweepJob is one released request: its index and when the dispatcher
// released it (at or just after its scheduled time).
type sweepJob struct {
	i    int
	sent time.Time
}

// pointSpec is one point of the sweep.
type pointSpec struct {
	rate     float64
	duration time.Duration
	clients  int
	offset   int    // the first request of the point (requests cycle)
	sessions bool   // send each request's session id
	feed     string // FeedAsync or FeedInline
	prefix   string
}

// sweepPoint offers spec.rate route requests per second, open loop, for
// spec.duration: a dispatcher releases request i at start + i/rate (every
// request due when it wakes up, so a late wake-up releases a burst) into an
// unbounded queue served by a pool of clients, and each request's latency
// runs from its release — a router that falls behind is charged for the
// queue it causes, while the dispatcher's own timer slack (Go's sleep
// overshoots by up to a millisecond) is not.
// Each routed request is then served on the chosen engine (by the client,
// or queued to the engine's goroutine: spec.feed) — its events flow into
// the index meanwhile — and freed in process. With the async feed, the
// point ends when the engines have served every queued request.
func (c *cluster) sweepPoint(t transport, reqs []Request, spec pointSpec) SweepPoint {
	n := max(int(spec.rate*spec.duration.Seconds()), 1)
	jobs := make(chan sweepJob, n)
	prober := c.startProber()
	feed := c.startFeeder(spec.feed, prober)
	sched := readSched()
	var (
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, n)
		errs     int
		lastDone time.Time
		wg       sync.WaitGroup
	)
	ctx := context.Background()
	for range spec.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var failed int
			for j := range jobs {
				k := (spec.offset + j.i) % len(reqs)
				id := spec.prefix + strconv.Itoa(j.i)
				session := ""
				if spec.sessions {
					session = reqs[k].Session
				}
				h := j.i % len(c.hosts)
				w, err := t.route(ctx, h, k, id, session)
				if err != nil || w < 0 || w >= len(c.engines) {
					failed++
					continue
				}
				mine = append(mine, time.Since(j.sent))
				feed.offer(w, &reqs[k], session)
				_ = c.hosts[h].Service.Free(ctx, id)
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += failed
			if now := time.Now(); now.After(lastDone) {
				lastDone = now
			}
			mu.Unlock()
		}()
	}
	start := time.Now()
	step := float64(time.Second) / spec.rate
	for i := 0; i < n; {
		now := time.Now()
		for ; i < n; i++ {
			due := start.Add(time.Duration(float64(i) * step))
			if due.After(now) {
				time.Sleep(due.Sub(now))
				break
			}
			jobs <- sweepJob{i: i, sent: now}
		}
	}
	close(jobs)
	wg.Wait()
	schedEnd := readSched()
	dropped := feed.stop()
	lags, timeouts := prober.stop()
	pt := SweepPoint{Workers: len(c.engines), Offered: spec.rate, Requests: n, Errors: errs, Dropped: dropped,
		Latency: Summarize(lat), Lag: Summarize(lags), SchedP99: schedQuantile(sched, schedEnd, 0.99)}
	if el := lastDone.Sub(start).Seconds(); el > 0 {
		pt.Achieved = float64(len(lat)) / el
	}
	pt.Saturated = Saturated(pt)
	pt.Valid, pt.Invalid = c.validity(lags, timeouts)
	if pt.Valid && dropped > 0 {
		pt.Valid, pt.Invalid = false, fmt.Sprintf("%d serves dropped (engines behind)", dropped)
	}
	return pt
}

// Saturated reports whether a sweep point shows the router at or past
// saturation: it completed under 95 % of the offered rate, failed more
// than 1 % of the requests, or its p99 exceeded a second.
func Saturated(p SweepPoint) bool {
	return p.Achieved < 0.95*p.Offered || p.Errors*100 > p.Requests || p.Latency.P99 > 1e6
}
