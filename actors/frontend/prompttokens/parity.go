package prompttokens

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// Probes are the texts the parity guard tokenizes both locally and on the
// engine: the classes where tokenizers part ways (normalization, CJK,
// emoji, whitespace runs, digit grouping, contractions, added tokens).
var Probes = []string{
	"Hello, world! How are you doing today?",
	"I'm sure they'll say we've done it; DON'T SHOUT.",
	"The year 2024 had 365 days; 1,000,000 and 3.14159265358979.",
	"日本語のテキストと中文分词测试，한국어 문장.",
	"Emoji: 😀👩‍👩‍👧‍👦🇯🇵 and combining e\u0301 vs é.",
	"func main() {\n\tfmt.Println(\"hi\")\n}\n\n\n    indented",
	"                                 long run of spaces\t\t\r\n\r\n",
	"<|im_start|>user\nHi<|im_end|>\n<|endoftext|><think>x</think>",
}

// Finding is the guard's last check of one engine of a model.
type Finding struct {
	Target
	Checked time.Time
	// Mismatches are the probes whose ids differed (empty: parity).
	Mismatches []string
	// EngineBlockSize is what the engine reports (0: it reports none).
	EngineBlockSize int
	// Err: the check could not run (engine unreachable, ...).
	Err string
}

// Warnings are the finding's lines for /workers.
func (f Finding) Warnings() []string {
	var out []string
	if len(f.Mismatches) > 0 {
		out = append(out, fmt.Sprintf("local tokenizer disagrees with the engine on %d of %d probes (first: %q): prompt text is tokenized by the engine", len(f.Mismatches), len(Probes), f.Mismatches[0]))
	}
	if f.EngineBlockSize > 0 && f.BlockSize > 0 && f.EngineBlockSize != f.BlockSize {
		out = append(out, fmt.Sprintf("engine reports block size %d, registered %d: prompt blocks will not match its KV events", f.EngineBlockSize, f.BlockSize))
	}
	return out
}

// Guard checks, at start and then periodically, that each model's local
// tokenizer gives the ids its engines give on the Probes, and that each
// engine runs with the block size it was registered with. A disagreement
// is loud — logged, counted, a /workers warning — and for tokens the
// engine wins: the model's text prompts go to the engine from then on,
// until a later check finds parity again. A block size mismatch cannot be
// fixed here (the engine's events are what they are); it is reported.
type Guard struct {
	r       *Resolver
	dir     *Directory
	logger  *slog.Logger
	timeout time.Duration

	mu       sync.Mutex
	findings map[[2]string]Finding // (model, url)
	checks   map[[2]string]int64   // (model, result) → count
}

// NewGuard returns a guard over the directory's targets, resolving through
// r (whose local tokenizers it checks and whose engine-wins switch it sets).
func NewGuard(r *Resolver, dir *Directory, logger *slog.Logger) *Guard {
	if logger == nil {
		logger = slog.Default()
	}
	return &Guard{r: r, dir: dir, logger: logger, timeout: 5 * time.Second,
		findings: map[[2]string]Finding{}, checks: map[[2]string]int64{}}
}

// Run checks at once and then every interval until ctx ends.
func (g *Guard) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		g.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check runs one round over every target and applies the outcome.
func (g *Guard) Check(ctx context.Context) []Finding {
	var out []Finding
	wins := map[string]bool{}
	for _, t := range g.dir.Targets() {
		f := g.check(ctx, t)
		out = append(out, f)
		wins[t.Model] = wins[t.Model] || len(f.Mismatches) > 0
	}
	g.mu.Lock()
	clear(g.findings)
	for _, f := range out {
		g.findings[[2]string{f.Model, f.URL}] = f
		g.checks[[2]string{f.Model, result(f)}]++
	}
	g.mu.Unlock()
	for model, w := range wins {
		g.r.setEngineWins(model, w)
	}
	return out
}

func result(f Finding) string {
	switch {
	case f.Err != "":
		return "error"
	case len(f.Mismatches) > 0:
		return "mismatch"
	}
	return "match"
}

func (g *Guard) check(ctx context.Context, t Target) Finding {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	f := Finding{Target: t, Checked: time.Now()}
	e := NewEngine(t.URL, g.r.opts.Client)
	if bs, err := e.BlockSize(ctx); err != nil {
		f.Err = err.Error()
	} else {
		f.EngineBlockSize = bs
	}
	if local := g.r.Tokenizer(t.Model); local != nil {
		for _, p := range Probes {
			want, err := e.TokenizeText(ctx, t.Model, p, true)
			if err != nil {
				f.Err = err.Error()
				break
			}
			if got, err := local.Encode(p, true); err != nil || !slices.Equal(got, want) {
				f.Mismatches = append(f.Mismatches, p)
			}
		}
	}
	for _, w := range f.Warnings() {
		g.logger.Warn("engine parity", "model", t.Model, "engine", t.URL, "warning", w)
	}
	if f.Err != "" {
		g.logger.Info("engine parity check incomplete", "model", t.Model, "engine", t.URL, "err", f.Err)
	}
	return f
}

// Warnings returns the last check's warnings for one engine of a model.
func (g *Guard) Warnings(model, url string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.findings[[2]string{model, BaseURL(url)}].Warnings()
}

// WriteMetrics writes the guard's figures in the Prometheus text format.
func (g *Guard) WriteMetrics(w io.Writer) error {
	g.mu.Lock()
	var checks, mism, blocks []string
	for k, n := range g.checks {
		checks = append(checks, fmt.Sprintf("kvrouter_tokenizer_parity_checks_total{model=%q,result=%q} %d\n", k[0], k[1], n))
	}
	for _, f := range g.findings {
		m, b := 0, 0
		if len(f.Mismatches) > 0 {
			m = 1
		}
		if f.EngineBlockSize > 0 && f.BlockSize > 0 && f.EngineBlockSize != f.BlockSize {
			b = 1
		}
		mism = append(mism, fmt.Sprintf("kvrouter_tokenizer_parity_mismatch{model=%q,engine=%q} %d\n", f.Model, f.URL, m))
		blocks = append(blocks, fmt.Sprintf("kvrouter_engine_block_size_mismatch{model=%q,engine=%q} %d\n", f.Model, f.URL, b))
	}
	g.mu.Unlock()
	var err error
	write := func(head string, lines []string) {
		sort.Strings(lines)
		if err == nil {
			_, err = io.WriteString(w, head)
		}
		for _, l := range lines {
			if err == nil {
				_, err = io.WriteString(w, l)
			}
		}
	}
	write("# HELP kvrouter_tokenizer_parity_checks_total Parity checks of a model's engines, by result (match, mismatch, error).\n# TYPE kvrouter_tokenizer_parity_checks_total counter\n", checks)
	write("# HELP kvrouter_tokenizer_parity_mismatch 1 when the engine's ids differ from the local tokenizer's on the probes (the engine wins).\n# TYPE kvrouter_tokenizer_parity_mismatch gauge\n", mism)
	write("# HELP kvrouter_engine_block_size_mismatch 1 when the engine reports another block size than registered.\n# TYPE kvrouter_engine_block_size_mismatch gauge\n", blocks)
	return err
}
