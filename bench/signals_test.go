package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/enginesignals"
	"github.com/kvrouter/kvrouter/messages"
)

// vllmExposition is a vLLM-sized /metrics answer: the gauges the
// extractor reads, two data-parallel engines, and, per engine, the
// histograms and counters a v1 engine serves (17 histograms of 20 to 25
// buckets, as its loggers declare them) plus the Python process series —
// about 110 kB, of which the extractor parses a few hundred bytes.
func vllmExposition() []byte {
	var b strings.Builder
	for _, name := range []string{"python_gc_objects_collected_total", "process_virtual_memory_bytes", "process_resident_memory_bytes",
		"process_start_time_seconds", "process_cpu_seconds_total", "process_open_fds"} {
		fmt.Fprintf(&b, "# HELP %s x\n# TYPE %s gauge\n%s 1.23e+09\n", name, name, name)
	}
	hist := []string{"time_to_first_token_seconds", "time_per_output_token_seconds", "e2e_request_latency_seconds",
		"request_queue_time_seconds", "request_inference_time_seconds", "request_prefill_time_seconds",
		"request_decode_time_seconds", "request_prompt_tokens", "request_generation_tokens", "iteration_tokens_total",
		"request_max_num_generation_tokens", "request_params_n", "request_params_max_tokens",
		"time_per_prefill_token_request_seconds", "inter_token_latency_seconds", "request_time_per_output_token_seconds",
		"spec_decode_num_accepted_tokens_per_pos"}
	for engine := range 2 {
		l := fmt.Sprintf(`model_name="meta-llama/Llama-3.1-8B-Instruct",engine="%d"`, engine)
		fmt.Fprintf(&b, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{%s} 3.0\n", l)
		fmt.Fprintf(&b, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{%s} 1.0\n", l)
		fmt.Fprintf(&b, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{%s} 0.42\n", l)
		fmt.Fprintf(&b, "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{%s} 123456.0\n", l)
		fmt.Fprintf(&b, "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{%s} 65432.0\n", l)
		fmt.Fprintf(&b, "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"%d\",num_gpu_blocks=\"27000\"} 1.0\n", engine)
		for _, h := range hist {
			fmt.Fprintf(&b, "# HELP vllm:%s Histogram.\n# TYPE vllm:%s histogram\n", h, h)
			for i := range 24 {
				fmt.Fprintf(&b, "vllm:%s_bucket{%s,le=\"%g\"} %d.0\n", h, l, 0.001*float64(int(1)<<i), i*17)
			}
			fmt.Fprintf(&b, "vllm:%s_bucket{%s,le=\"+Inf\"} 400.0\nvllm:%s_count{%s} 400.0\nvllm:%s_sum{%s} 812.5\n", h, l, h, l, h, l)
			fmt.Fprintf(&b, "# TYPE vllm:%s_created gauge\nvllm:%s_created{%s} 1.7647542851e+09\n", h, h, l)
		}
	}
	return []byte(b.String())
}

// BenchmarkExtract is the extractor's work per scrape of one rank: the
// byte scan over the whole exposition and the parse of the lines it keeps.
func BenchmarkExtract(b *testing.B) {
	body := vllmExposition()
	var x enginesignals.Extractor
	if s, err := x.Extract(body, enginesignals.VLLM, 1); err != nil || s.Running != 3 {
		b.Fatalf("%+v %v", s, err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Extract(body, enginesignals.Auto, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScrape is one whole scrape as the scraper makes it: an HTTP
// GET over loopback on a kept-alive connection, reading the answer and
// extracting a rank's signals (the server's side runs in the same
// process and is included; an engine's own cost of rendering its
// metrics is not).
func BenchmarkScrape(b *testing.B) {
	body := vllmExposition()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	s := enginesignals.NewScraper(enginesignals.Config{})
	defer s.Close()
	client := s.Config().Client
	var x enginesignals.Extractor
	buf := make([]byte, 0, len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		buf = buf[:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, 0)[:len(buf)]
			}
			n, err := resp.Body.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if _, err := x.Extract(buf, enginesignals.VLLM, 0); err != nil {
			b.Fatal(err)
		}
	}
	_ = messages.WorkerKey{}
}
