package hitcheck

import (
	"slices"

	"github.com/kvrouter/kvrouter/messages"
)

// Config tunes the check; zero fields take the defaults below.
type Config struct {
	// Window is how many recent reports per worker are kept.
	Window int
	// MinPredicted is the predicted tokens a window needs before it is
	// judged.
	MinPredicted uint64
	// FlagBelow and ClearAbove are the reported/predicted ratios that
	// flag and clear a worker (FlagBelow < ClearAbove).
	FlagBelow, ClearAbove float64
	// MinCredit is the lowest credit a flagged worker's overlap gets.
	MinCredit float64
	// MaxWorkers bounds the workers tracked.
	MaxWorkers int
}

// Defaults.
const (
	DefaultWindow       = 32
	DefaultMinPredicted = 1024
	DefaultFlagBelow    = 0.5
	DefaultClearAbove   = 0.8
	DefaultMinCredit    = 0.25
	DefaultMaxWorkers   = 65536
)

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.MinPredicted == 0 {
		c.MinPredicted = DefaultMinPredicted
	}
	if c.FlagBelow <= 0 {
		c.FlagBelow = DefaultFlagBelow
	}
	if c.ClearAbove <= 0 {
		c.ClearAbove = DefaultClearAbove
	}
	if c.ClearAbove < c.FlagBelow {
		c.ClearAbove = c.FlagBelow
	}
	if c.MinCredit <= 0 {
		c.MinCredit = DefaultMinCredit
	}
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = DefaultMaxWorkers
	}
	return c
}

// Report is one relayed request's outcome: the cached tokens predicted at
// route time, those the engine reported, and the prompt's length.
type Report struct {
	Key                 messages.WorkerKey
	Predicted, Reported uint64
	PromptTokens        uint64
}

// Verdict is a worker's state after a report: Flagged, and the credit its
// overlap gets in the cost (1 unless flagged). Changed says the verdict
// differs from the one before the report.
type Verdict struct {
	Flagged bool
	Credit  float64
	Changed bool
}

// WorkerStats is one worker's check, for /workers and the metrics.
type WorkerStats struct {
	Key messages.WorkerKey
	// Reports counts every report; PredictedTokens and ReportedTokens
	// sum them (all only grow).
	Reports                         uint64
	PredictedTokens, ReportedTokens uint64
	// Ratio is the window's reported/predicted (0 before it is judged:
	// Judged false).
	Ratio  float64
	Judged bool
	Verdict
}

type sample struct{ predicted, reported uint64 }

type worker struct {
	ring                []sample
	next                int
	winPred, winRep     uint64
	reports             uint64
	totalPred, totalRep uint64
	flagged             bool
	credit              float64
}

// Tracker is the check over every worker.
type Tracker struct {
	cfg     Config
	workers map[messages.WorkerKey]*worker
	// Dropped counts reports for workers past MaxWorkers.
	Dropped uint64
	// Errors is the distribution of (reported − predicted) / prompt
	// tokens over every report with a prompt: counts per ErrorBounds
	// bucket (the last one: above the last bound).
	Errors [len(ErrorBounds) + 1]uint64
	// ErrorSum sums those errors (the histogram's sum).
	ErrorSum float64
}

// ErrorBounds are the upper bounds of the prediction error buckets, as a
// share of the prompt: negative when the engine served less from cache
// than predicted.
var ErrorBounds = [...]float64{-1, -0.5, -0.25, -0.1, -0.01, 0.01, 0.1, 0.25, 0.5, 1}

// New returns an empty Tracker.
func New(cfg Config) *Tracker {
	return &Tracker{cfg: cfg.WithDefaults(), workers: map[messages.WorkerKey]*worker{}}
}

// Observe takes one report and answers the worker's verdict.
func (t *Tracker) Observe(r Report) Verdict {
	if r.PromptTokens > 0 {
		e := (float64(r.Reported) - float64(r.Predicted)) / float64(r.PromptTokens)
		i, _ := slices.BinarySearch(ErrorBounds[:], e)
		t.Errors[i]++
		t.ErrorSum += e
	}
	w := t.workers[r.Key]
	if w == nil {
		if len(t.workers) >= t.cfg.MaxWorkers {
			t.Dropped++
			return Verdict{Credit: 1}
		}
		w = &worker{ring: make([]sample, 0, t.cfg.Window), credit: 1}
		t.workers[r.Key] = w
	}
	w.reports++
	w.totalPred += r.Predicted
	w.totalRep += r.Reported
	before := Verdict{Flagged: w.flagged, Credit: w.credit}
	if r.Predicted > 0 {
		w.push(sample{r.Predicted, min(r.Reported, r.Predicted)}, t.cfg.Window)
	}
	if ratio, judged := w.ratio(t.cfg.MinPredicted); judged {
		switch {
		case ratio < t.cfg.FlagBelow:
			w.flagged = true
		case ratio >= t.cfg.ClearAbove:
			w.flagged = false
		}
		w.credit = 1
		if w.flagged {
			w.credit = max(ratio, t.cfg.MinCredit)
		}
	}
	v := Verdict{Flagged: w.flagged, Credit: w.credit}
	v.Changed = v != before
	return v
}

// push adds s to the window, dropping its oldest sample when full. A
// sample's reported part is capped at its predicted part, so reports
// above the prediction cannot mask misses on other requests.
func (w *worker) push(s sample, window int) {
	if len(w.ring) < window {
		w.ring = append(w.ring, s)
	} else {
		old := w.ring[w.next]
		w.winPred -= old.predicted
		w.winRep -= old.reported
		w.ring[w.next] = s
		w.next = (w.next + 1) % window
	}
	w.winPred += s.predicted
	w.winRep += s.reported
}

func (w *worker) ratio(minPredicted uint64) (float64, bool) {
	if w.winPred < minPredicted || w.winPred == 0 {
		return 0, false
	}
	return float64(w.winRep) / float64(w.winPred), true
}

// ForgetWorker drops every rank of a worker (unregistered): a new
// registration starts clean.
func (t *Tracker) ForgetWorker(w messages.WorkerID) {
	for k := range t.workers {
		if k.Worker == w {
			delete(t.workers, k)
		}
	}
}

// Credit is k's current credit (1 when not tracked or not flagged).
func (t *Tracker) Credit(k messages.WorkerKey) float64 {
	if w := t.workers[k]; w != nil {
		return w.credit
	}
	return 1
}

// Stats lists every tracked worker, sorted by key.
func (t *Tracker) Stats() []WorkerStats {
	out := make([]WorkerStats, 0, len(t.workers))
	for k, w := range t.workers {
		ratio, judged := w.ratio(t.cfg.MinPredicted)
		out = append(out, WorkerStats{Key: k, Reports: w.reports, PredictedTokens: w.totalPred, ReportedTokens: w.totalRep,
			Ratio: ratio, Judged: judged, Verdict: Verdict{Flagged: w.flagged, Credit: w.credit}})
	}
	slices.SortFunc(out, func(a, b WorkerStats) int { return a.Key.Compare(b.Key) })
	return out
}
