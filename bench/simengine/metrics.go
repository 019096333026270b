package simengine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// The engine's /metrics, in the Prometheus text format of the engine and
// version HTTPOptions.Metrics names, with values from its own state: the
// requests queued for a running slot (HTTPOptions.MaxRunning) and those
// in the running set, the KV blocks the running requests hold out of the
// cache's capacity, the prefix-cache tokens queried and hit, the block
// size and capacity. The names and label sets are the engines' own
// (actors/enginesignals/README.md lists them); they are written here
// independently of that package, so its tests can catch a disagreement.

// Metrics dialects (HTTPOptions.Metrics).
const (
	MetricsVLLM     = "vllm"         // vLLM ≥ 0.9, v1 engine: vllm:kv_cache_usage_perc, vllm:prefix_cache_*
	MetricsVLLMOld  = "vllm-0.8"     // vLLM before the renames: vllm:gpu_cache_usage_perc, vllm:gpu_prefix_cache_*
	MetricsSGLang   = "sglang"       // SGLang with the sglang: prefix (≤ 0.5.3)
	MetricsSGLangV2 = "sglang-0.5.4" // SGLang with the sglang_ prefix
)

// MetricsDialects lists the accepted HTTPOptions.Metrics values.
var MetricsDialects = []string{MetricsVLLM, MetricsVLLMOld, MetricsSGLang, MetricsSGLangV2}

// load is the engine's request state as its metrics report it.
type load struct {
	slots chan struct{} // nil: no limit on running requests

	mu                    sync.Mutex
	waiting, running      int
	runningBlocks         int
	queriedTokens, hitTok int
	stopped               bool
}

// admit waits for a running slot (counted as waiting meanwhile) and
// books the request's blocks; false when ctx ended first. release undoes it.
func (l *load) admit(ctx context.Context, blocks int) bool {
	if l.slots != nil {
		l.mu.Lock()
		l.waiting++
		l.mu.Unlock()
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			l.mu.Lock()
			l.waiting--
			l.mu.Unlock()
			return false
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.running++
	l.runningBlocks += blocks
	l.mu.Unlock()
	return true
}

func (l *load) release(blocks int) {
	l.mu.Lock()
	l.running--
	l.runningBlocks -= blocks
	l.mu.Unlock()
	if l.slots != nil {
		<-l.slots
	}
}

func (l *load) prefix(prompt, cached int) {
	l.mu.Lock()
	l.queriedTokens += prompt
	l.hitTok += cached
	l.mu.Unlock()
}

// StopMetrics makes /metrics answer 503 (stopped) or serve again: an
// engine whose metrics went away while it still serves.
func (s *HTTPServer) StopMetrics(stopped bool) {
	s.load.mu.Lock()
	s.load.stopped = stopped
	s.load.mu.Unlock()
}

// Waiting and Running are the requests queued for a slot and running.
func (s *HTTPServer) Waiting() int {
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	return s.load.waiting
}

// Running is the requests in the running set.
func (s *HTTPServer) Running() int {
	s.load.mu.Lock()
	defer s.load.mu.Unlock()
	return s.load.running
}

func (s *HTTPServer) metrics(w http.ResponseWriter, _ *http.Request) {
	l := &s.load
	l.mu.Lock()
	stopped, waiting, running, blocks, queried, hit := l.stopped, l.waiting, l.running, l.runningBlocks, l.queriedTokens, l.hitTok
	l.mu.Unlock()
	if stopped {
		http.Error(w, "metrics stopped", http.StatusServiceUnavailable)
		return
	}
	capacity := s.eng.opts.CapacityBlocks
	usage := min(1, float64(blocks)/float64(capacity))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b strings.Builder
	gauge := func(name, help, labels string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %v\n", name, help, name, name, labels, v)
	}
	counter := func(name, help, labels string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s{%s} %v\n", name, help, name, name, labels, v)
	}
	model, bs, rank := s.opts.Model, s.eng.opts.BlockSize, s.eng.opts.DpRank
	switch d := s.opts.Metrics; d {
	case MetricsVLLM, MetricsVLLMOld:
		l := fmt.Sprintf(`model_name=%q,engine="%d"`, model, rank)
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", l, float64(running))
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", l, float64(waiting))
		kv, pq, ph := "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"
		if d == MetricsVLLMOld {
			kv, pq, ph = "vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total"
		}
		gauge(kv, "KV-cache usage. 1 means 100 percent usage.", l, usage)
		counter(pq, "Prefix cache queries, in terms of number of queried tokens.", l, float64(queried))
		counter(ph, "Prefix cache hits, in terms of number of cached tokens.", l, float64(hit))
		fmt.Fprintf(&b, "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n"+
			"# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{%s,le=\"+Inf\"} 0\n", l)
		gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
			fmt.Sprintf(`block_size="%d",cache_dtype="auto",enable_prefix_caching="True",engine="%d",num_gpu_blocks="%d"`, bs, rank, capacity), 1)
	case MetricsSGLang, MetricsSGLangV2:
		p := "sglang:"
		if d == MetricsSGLangV2 {
			p = "sglang_"
		}
		l := fmt.Sprintf(`model_name=%q,engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="%d"`, model, rank)
		gauge(p+"num_running_reqs", "The number of running requests.", l, float64(running))
		gauge(p+"num_queue_reqs", "The number of requests in the waiting queue.", l, float64(waiting))
		gauge(p+"token_usage", "The token usage.", l, usage)
		gauge(p+"cache_config_info", "Information of the cache config", fmt.Sprintf(`%s,page_size="%d",num_pages="%d"`, l, bs, capacity), 1)
	}
	_, _ = w.Write([]byte(b.String()))
}
