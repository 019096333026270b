package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
)

// loopback is an HTTP server on a free loopback port.
type loopback struct {
	url string
	srv *http.Server
}

func serveLoopback(srv *http.Server) (*loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	return &loopback{url: "http://" + ln.Addr().String(), srv: srv}, nil
}

func (l *loopback) close() { _ = l.srv.Shutdown(context.Background()) }

// streamed is what the demo's clients saw: the engines' cached tokens per
// request, where each went, and each one's time to first token.
type streamed struct {
	demoTally
	ttft []time.Duration
}

// streamThroughProxy sends the prompts in order from clients concurrent
// clients, each streaming POST /v1/completions through the proxy, and
// prints progress every second.
func streamThroughProxy(base string, prompts [][]uint32, clients int, stdout io.Writer) (streamed, time.Duration, error) {
	var (
		mu       sync.Mutex
		out      streamed
		firstErr error
		done     int
	)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Second}
	next := make(chan int)
	start, lastReport := time.Now(), time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range next {
				r, err := streamOne(hc, base, i, prompts[i])
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("request %d: %w", i, err)
				}
				if err == nil {
					out.add(i, len(prompts[i]), r.cached, r.worker-1)
					out.ttft = append(out.ttft, r.ttft)
				}
				done++
				if time.Since(lastReport) >= time.Second {
					lastReport = time.Now()
					fmt.Fprintf(stdout, "  %5d requests  %6.0f requests/s  hit rate %5.1f%%  requests per engine %v\n",
						done, float64(done)/time.Since(start).Seconds(), 100*out.hitRate(), out.perEngine)
				}
				mu.Unlock()
			}
		})
	}
	for i := range prompts {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out, time.Since(start), firstErr
}

// oneAnswer is one streamed answer as the client saw it.
type oneAnswer struct {
	worker, cached int
	ttft           time.Duration
}

// streamOne streams one completion and reads the engine's cached tokens
// from its final usage chunk and the worker from x-kvrouter-worker.
func streamOne(hc *http.Client, base string, i int, prompt []uint32) (oneAnswer, error) {
	var a oneAnswer
	body, err := json.Marshal(map[string]any{"model": "demo", "prompt": prompt, "stream": true})
	if err != nil {
		return a, err
	}
	req, err := http.NewRequest(http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(proxy.RequestIDHeader, fmt.Sprint("demo-", i))
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return a, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	if _, err := fmt.Sscanf(resp.Header.Get(proxy.WorkerHeader), "%d:", &a.worker); err != nil || a.worker < 1 {
		return a, fmt.Errorf("answer without a worker header (%q)", resp.Header.Get(proxy.WorkerHeader))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if a.ttft == 0 {
			a.ttft = time.Since(t0)
		}
		var chunk struct {
			Usage *struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if data != "[DONE]" && json.Unmarshal([]byte(data), &chunk) == nil && chunk.Usage != nil {
			a.cached = chunk.Usage.Details.Cached
		}
	}
	return a, sc.Err()
}
