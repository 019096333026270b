package prompttokens

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// Reasons a prompt resolves to FromNone (the values of the reason label).
const (
	ReasonNoTokenizer = "no_tokenizer"   // completion text, no local tokenizer and no engine
	ReasonNoEngine    = "no_engine"      // chat, no engine to render it
	ReasonTimeout     = "engine_timeout" // the engine did not answer within the deadline
	ReasonEngineError = "engine_error"   // the engine answered with an error or nonsense
)

// Stats counts resolutions by source and, for FromNone, by reason.
type Stats struct {
	mu     sync.Mutex
	counts map[[2]string]int64 // (source, reason) → count
	cached int64
}

func (s *Stats) count(res Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[[2]string]int64{}
	}
	s.counts[[2]string{string(res.Source), res.Reason}]++
	if res.Cached {
		s.cached++
	}
}

// WriteMetrics writes the resolver's counters in the Prometheus text
// format (for telemetry.Metrics.Handler).
func (r *Resolver) WriteMetrics(w io.Writer) error {
	s := &r.stats
	s.mu.Lock()
	keys := make([][2]string, 0, len(s.counts))
	for k := range s.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("kvrouter_prompt_tokens_total{source=%q,reason=%q} %d\n", k[0], k[1], s.counts[k]))
	}
	cached := s.cached
	s.mu.Unlock()
	if _, err := io.WriteString(w, "# HELP kvrouter_prompt_tokens_total Prompts resolved to token ids, by source (request, local, engine, none) and, for none, the reason.\n# TYPE kvrouter_prompt_tokens_total counter\n"); err != nil {
		return err
	}
	for _, l := range lines {
		if _, err := io.WriteString(w, l); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "# HELP kvrouter_prompt_tokens_engine_cache_hits_total Engine tokenizations served from the cache.\n# TYPE kvrouter_prompt_tokens_engine_cache_hits_total counter\nkvrouter_prompt_tokens_engine_cache_hits_total %d\n", cached)
	return err
}
