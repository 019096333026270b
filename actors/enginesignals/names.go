package enginesignals

// The engines' metric names, per engine and version (README.md beside this
// file has the same table with where each name comes from). Each signal
// lists the names to try, newest first: the first one present in an
// exposition is the one read, and Signals.KVUsageName says which it was.

// Engine families the extractor knows (the registration's engine choice
// picks one; "auto" tries them in this order).
const (
	VLLM   = "vllm"
	SGLang = "sglang"
	TRTLLM = "trtllm" // trtllm-serve's own names, then Triton's TensorRT-LLM backend
	Auto   = "auto"
)

// sample names one sample of an exposition: a metric name, and when Label
// is set, the only samples of it whose Label has Value (Triton packs
// several signals into one metric, told apart by a label).
type sample struct {
	Name, Label, Value string
}

// family is one engine's names for every signal. Empty lists: the engine
// does not report that signal.
type family struct {
	engine string
	// rankLabel is the label carrying the data-parallel rank a sample is
	// of ("" when the engine puts none on its samples).
	rankLabel                 string
	waiting, running, kvUsage []sample
	// Block size and total blocks: from labels of an info gauge
	// (cacheInfo, blockSizeLabel, numBlocksLabel), or from gauges.
	cacheInfo                      []sample
	blockSizeLabel, numBlocksLabel string
	blockSize, numBlocks           []sample
	// prefixQueries, prefixHits: the engine's cumulative prefix-cache
	// counters, in tokens.
	prefixQueries, prefixHits []sample
	// lora is vLLM's LoRA info gauge.
	lora []sample
}

func names(ns ...string) []sample {
	out := make([]sample, len(ns))
	for i, n := range ns {
		out[i] = sample{Name: n}
	}
	return out
}

// sglangNames lists an SGLang metric under both prefixes: "sglang:" as its
// source declares the names, "sglang_" as some releases and exporters
// expose them (README.md, "SGLang's two prefixes").
func sglangNames(suffix string) []sample {
	return names("sglang:"+suffix, "sglang_"+suffix)
}

var families = []family{
	{
		engine:    VLLM,
		rankLabel: "engine",
		waiting:   names("vllm:num_requests_waiting"),
		running:   names("vllm:num_requests_running"),
		// Renamed in 0.9; the old name was still emitted (deprecated)
		// for a while and is all older engines have.
		kvUsage:        names("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
		cacheInfo:      names("vllm:cache_config_info"),
		blockSizeLabel: "block_size", numBlocksLabel: "num_gpu_blocks",
		prefixQueries: names("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
		prefixHits:    names("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
		lora:          names("vllm:lora_requests_info"),
	},
	{
		engine:         SGLang,
		rankLabel:      "dp_rank",
		waiting:        sglangNames("num_queue_reqs"),
		running:        sglangNames("num_running_reqs"),
		kvUsage:        sglangNames("token_usage"),
		cacheInfo:      sglangNames("cache_config_info"),
		blockSizeLabel: "page_size", numBlocksLabel: "num_pages",
	},
	{
		engine:  TRTLLM,
		waiting: append(names("trtllm_num_requests_waiting"), sample{Name: "nv_trt_llm_request_metrics", Label: "request_type", Value: "waiting"}),
		running: append(names("trtllm_num_requests_running"), sample{Name: "nv_trt_llm_request_metrics", Label: "request_type", Value: "scheduled"}),
		kvUsage: append(names("trtllm_kv_cache_utilization"),
			sample{Name: "nv_trt_llm_kv_cache_block_metrics", Label: "kv_cache_block_type", Value: "fraction"}),
		blockSize: append(names("trtllm_kv_cache_tokens_per_block"),
			sample{Name: "nv_trt_llm_kv_cache_block_metrics", Label: "kv_cache_block_type", Value: "tokens_per"}),
		numBlocks: append(names("trtllm_kv_cache_max_blocks"),
			sample{Name: "nv_trt_llm_kv_cache_block_metrics", Label: "kv_cache_block_type", Value: "max"}),
	},
}

// familyOf returns the family of an engine choice (nil for Auto or an
// unknown name: try every family).
func familyOf(engine string) *family {
	for i := range families {
		if families[i].engine == engine {
			return &families[i]
		}
	}
	return nil
}

// wanted is every metric name an exposition line must have to be kept.
var wanted = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range families {
		for _, l := range [][]sample{f.waiting, f.running, f.kvUsage, f.cacheInfo, f.blockSize, f.numBlocks, f.prefixQueries, f.prefixHits, f.lora} {
			for _, s := range l {
				m[s.Name] = true
			}
		}
	}
	return m
}()

// wantedLen[n] is whether some wanted name is n bytes long.
var wantedLen = func() (lens [128]bool) {
	for n := range wanted {
		lens[len(n)] = true
	}
	return lens
}()
