package enginesignals

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The fixtures are built from the engines' sources (README.md's table):
// the metric names, label sets and value types their Prometheus loggers
// declare, as the Python client writes them.
func TestExtractEachEngineFormat(t *testing.T) {
	cases := []struct {
		file, engine string
		rank         int
		want         Signals
	}{
		{"vllm-v1.txt", VLLM, 0, Signals{Engine: VLLM, Waiting: 1, Running: 3, HasLoad: true,
			KVUsage: 0.25, KVUsageName: "vllm:kv_cache_usage_perc", HasKV: true, BlockSize: 16, TotalBlocks: 27000,
			PrefixQueries: 12800, PrefixHits: 9600, HasPrefix: true,
			Lora: &Lora{Running: []string{"sql-lora", "chat-lora"}, Waiting: []string{"math-lora"}, Max: 2}}},
		// the second data-parallel engine of the same endpoint
		{"vllm-v1.txt", VLLM, 1, Signals{Engine: VLLM, Waiting: 6, Running: 7, HasLoad: true,
			KVUsage: 0.5, KVUsageName: "vllm:kv_cache_usage_perc", HasKV: true, BlockSize: 16, TotalBlocks: 26000,
			PrefixQueries: 6400, PrefixHits: 0, HasPrefix: true,
			Lora: &Lora{Running: []string{"sql-lora", "chat-lora"}, Waiting: []string{"math-lora"}, Max: 2}}},
		// before the KV gauge's rename, and before the engine label
		{"vllm-v0.8.txt", VLLM, 0, Signals{Engine: VLLM, Waiting: 0, Running: 2, HasLoad: true,
			KVUsage: 0.125, KVUsageName: "vllm:gpu_cache_usage_perc", HasKV: true, BlockSize: 32, TotalBlocks: 8192,
			PrefixQueries: 100, PrefixHits: 32, HasPrefix: true}},
		{"sglang-0.5.3.txt", SGLang, 0, Signals{Engine: SGLang, Waiting: 4, Running: 12, HasLoad: true,
			KVUsage: 0.62, KVUsageName: "sglang:token_usage", HasKV: true, BlockSize: 1, TotalBlocks: 412000}},
		{"sglang-0.5.4.txt", SGLang, 0, Signals{Engine: SGLang, Waiting: 4, Running: 12, HasLoad: true,
			KVUsage: 0.62, KVUsageName: "sglang_token_usage", HasKV: true, BlockSize: 1, TotalBlocks: 412000}},
		{"trtllm-serve.txt", TRTLLM, 0, Signals{Engine: TRTLLM, Waiting: 2, Running: 9, HasLoad: true,
			KVUsage: 0.875, KVUsageName: "trtllm_kv_cache_utilization", HasKV: true, BlockSize: 32, TotalBlocks: 4096}},
		{"triton-trtllm.txt", TRTLLM, 0, Signals{Engine: TRTLLM, Waiting: 3, Running: 5, HasLoad: true,
			KVUsage: 0.5, KVUsageName: "nv_trt_llm_kv_cache_block_metrics", HasKV: true, BlockSize: 64, TotalBlocks: 2048}},
	}
	for _, c := range cases {
		for _, engine := range []string{c.engine, Auto} {
			var x Extractor
			got, err := x.Extract(fixture(t, c.file), engine, c.rank)
			if err != nil {
				t.Fatalf("%s as %s rank %d: %v", c.file, engine, c.rank, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s as %s rank %d:\n got  %+v %+v\n want %+v %+v", c.file, engine, c.rank, got, got.Lora, c.want, c.want.Lora)
			}
		}
	}
}

func TestExtractWrongEngineFindsNoSignals(t *testing.T) {
	var x Extractor
	_, err := x.Extract(fixture(t, "sglang-0.5.4.txt"), VLLM, 0)
	if ReasonOf(err) != ReasonNoSignals || !strings.Contains(err.Error(), "vllm") {
		t.Fatalf("sglang text read as vllm: %v", err)
	}
}

func TestExtractRankOfAnotherEngine(t *testing.T) {
	var x Extractor
	// Two engines on the endpoint, neither of them rank 2.
	if _, err := x.Extract(fixture(t, "vllm-v1.txt"), VLLM, 2); ReasonOf(err) != ReasonNoSignals {
		t.Fatalf("rank 2 of an endpoint with ranks 0 and 1: %v", err)
	}
	// One engine whose index is not the registered rank: it is that rank's.
	body := "vllm:num_requests_running{model_name=\"m\",engine=\"3\"} 4\n"
	got, err := x.Extract([]byte(body), VLLM, 1)
	if err != nil || got.Running != 4 {
		t.Fatalf("lone engine 3 read as rank 1: %+v %v", got, err)
	}
}

func TestExtractRefusesBadValues(t *testing.T) {
	cases := map[string]string{
		"negative queue":  "vllm:num_requests_waiting{engine=\"0\"} -1\n",
		"NaN running":     "vllm:num_requests_running{engine=\"0\"} NaN\n",
		"usage over one":  "vllm:kv_cache_usage_perc{engine=\"0\"} 85\n",
		"block size text": "vllm:num_requests_running 1\nvllm:cache_config_info{block_size=\"sixteen\"} 1\n",
		"huge adapter":    "vllm:num_requests_running 1\nvllm:lora_requests_info{max_lora=\"1\",running_lora_adapters=\"" + strings.Repeat("a", MaxAdapterName+1) + "\",waiting_lora_adapters=\"\"} 1\n",
		"bad max_lora":    "vllm:num_requests_running 1\nvllm:lora_requests_info{max_lora=\"-3\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"} 1\n",
	}
	for name, body := range cases {
		var x Extractor
		if _, err := x.Extract([]byte(body), VLLM, 0); ReasonOf(err) != ReasonBadValue {
			t.Errorf("%s: %v, want %s", name, err, ReasonBadValue)
		}
	}
}

func TestExtractMalformedText(t *testing.T) {
	var x Extractor
	for _, body := range []string{
		"vllm:num_requests_running{engine=\"0\" 3\n", // unterminated label set
		"vllm:num_requests_running{engine=\"0\"} three\n",
	} {
		if _, err := x.Extract([]byte(body), VLLM, 0); ReasonOf(err) != ReasonParse {
			t.Errorf("%q: %v, want %s", body, err, ReasonParse)
		}
	}
	// The same family in two places, each with its TYPE line (two
	// processes' output concatenated): still read.
	twice := "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 1\n" +
		"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\"} 0\n" +
		"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"1\"} 5\n"
	if got, err := x.Extract([]byte(twice), VLLM, 1); err != nil || got.Running != 5 {
		t.Fatalf("repeated TYPE lines: %+v %v", got, err)
	}
	// Lines of other metrics are never parsed: garbage there is no error.
	got, err := x.Extract([]byte("garbage{{{ here\nvllm:num_requests_running 2\n"), Auto, 0)
	if err != nil || got.Running != 2 {
		t.Fatalf("garbage in another metric: %+v %v", got, err)
	}
}

func TestExtractCapsAdapterLists(t *testing.T) {
	names := make([]string, MaxAdapters+10)
	for i := range names {
		names[i] = "a" + strings.Repeat("x", i%5) + string(rune('a'+i%26))
	}
	body := "vllm:num_requests_running 0\nvllm:lora_requests_info{max_lora=\"8\",running_lora_adapters=\"" +
		strings.Join(names, ",") + "\",waiting_lora_adapters=\"\"} 1\n"
	var x Extractor
	got, err := x.Extract([]byte(body), VLLM, 0)
	if err != nil || len(got.Lora.Running) != MaxAdapters || !got.Lora.Truncated {
		t.Fatalf("%d adapters: kept %d, truncated %v, %v", len(names), len(got.Lora.Running), got.Lora.Truncated, err)
	}
}

func TestSaturation(t *testing.T) {
	th := Thresholds{}.WithDefaults()
	cases := []struct {
		s     Signals
		stale bool
		want  string
	}{
		{Signals{HasLoad: true, Waiting: 5, HasKV: true, KVUsage: 0.8}, false, ""},
		{Signals{HasLoad: true, Waiting: 6}, false, SaturatedQueue},
		{Signals{HasKV: true, KVUsage: 0.81}, false, SaturatedKV},
		{Signals{}, true, SaturatedStale},
		{Signals{HasLoad: true}, true, SaturatedStale},
		{Signals{Waiting: 100}, false, ""}, // not reported: never saturates
	}
	for _, c := range cases {
		if got := th.Saturation(c.s, c.stale); got != c.want {
			t.Errorf("%+v stale %v: %q, want %q", c.s, c.stale, got, c.want)
		}
	}
	if (Thresholds{KVUsage: 1.5}).Check() == nil || (Thresholds{Queue: -1}).Check() == nil {
		t.Fatal("impossible thresholds accepted")
	}
}
