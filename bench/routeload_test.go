package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/messages/api"
)

var (
	loadRate   = flag.Int("route-rate", 10_000, "BenchmarkRouteUnderLoad: offered routes per second")
	loadIngest = flag.Int("route-ingest", 100_000, "BenchmarkRouteUnderLoad: fresh blocks per second the engines publish")
)

const (
	loadClients = 64 // concurrent callers taking the released requests
	loadBlocks  = 64 // blocks of each fresh prompt the feeder serves
)

// BenchmarkRouteUnderLoad measures route latency under an open-loop offered
// rate (-route-rate) while the fixture's engines publish fresh blocks
// (-route-ingest), so the index applies batches between lookups. Request i is
// released at start + i/rate to loadClients callers; latency runs from the
// release (queueing behind a slow router counts). Transports: in process
// (Service.Route), over HTTP, and the HTTP floor — a net/http handler that
// decodes the same body and answers a fixed small JSON, under the same
// ingest — so http / floor is a ratio measured in one run. Each routed
// request is freed. Run with -benchtime Nx: N requests per transport.
func BenchmarkRouteUnderLoad(b *testing.B) {
	f := newRouteFixture(b)
	floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			TokenIDs  []uint32 `json:"token_ids"`
			ModelName string   `json:"model_name"`
			RequestID string   `json:"request_id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"worker_id":1,"dp_rank":0,"overlap_blocks":0,"cached_tokens":0}`)
	}))
	b.Cleanup(floor.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loadClients}}
	post := func(url string, i int, id string) error {
		body, _ := json.Marshal(map[string]any{"token_ids": f.prompts[i%len(f.prompts)], "model_name": "m", "request_id": id})
		resp, err := client.Post(url+"/route", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	transports := []struct {
		name  string
		route func(i int, id string) error
		free  bool // the request was routed: free it
	}{
		{"in-process", func(i int, id string) error {
			_, err := f.svc.Route(context.Background(), api.RouteRequest{TokenIDs: f.prompts[i%len(f.prompts)], ModelName: "m", RequestID: id})
			return err
		}, true},
		{"http", func(i int, id string) error { return post(f.url, i, id) }, true},
		{"floor-http", func(i int, id string) error { return post(floor.URL, i, id) }, false},
	}
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			stop := feed(f)
			lat := releaseAt(b, *loadRate, func(i int) error {
				id := fmt.Sprint(tr.name, i)
				err := tr.route(i, id)
				if tr.free {
					_ = f.svc.Free(context.Background(), id)
				}
				return err
			})
			fed := stop()
			reportLatency(b, lat)
			b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds()), "p99.9-µs")
			b.ReportMetric(fed, "ingest-blocks/s")
		})
	}
}

// releaseAt releases b.N calls of do at rate per second to loadClients
// callers and returns each call's latency from its release.
func releaseAt(b *testing.B, rate int, do func(i int) error) []time.Duration {
	type job struct {
		i  int
		at time.Time
	}
	jobs := make(chan job, b.N)
	lats := make([][]time.Duration, loadClients)
	errs := make(chan error, loadClients)
	var wg sync.WaitGroup
	for c := range lats {
		wg.Go(func() {
			for j := range jobs {
				if err := do(j.i); err != nil {
					errs <- err
					return
				}
				lats[c] = append(lats[c], time.Since(j.at))
			}
		})
	}
	gap := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		at := start.Add(time.Duration(i) * gap)
		if d := time.Until(at); d > 0 {
			time.Sleep(d) // pacing the open loop, not waiting for an effect
		}
		if now := time.Now(); now.After(at) {
			at = now // the dispatcher's own lateness does not count
		}
		jobs <- job{i, at}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	var out []time.Duration
	for _, l := range lats {
		out = append(out, l...)
	}
	return out
}

// feed makes the fixture's engines serve fresh loadBlocks-block prompts at
// -route-ingest blocks per second until the returned stop, which reports the
// blocks per second it fed.
func feed(f *routeFixture) (stop func() float64) {
	done := make(chan struct{})
	var fed int
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(7, 11))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		tokens := make([]uint32, loadBlocks*16)
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for want := int(time.Since(start) * time.Duration(*loadIngest) / time.Second); fed < want; fed += loadBlocks {
				for k := range tokens {
					tokens[k] = rng.Uint32N(1 << 17)
				}
				f.engines[n%len(f.engines)].Serve(tokens, "")
			}
		}
	})
	return func() float64 {
		close(done)
		wg.Wait()
		return float64(fed) / time.Since(start).Seconds()
	}
}
