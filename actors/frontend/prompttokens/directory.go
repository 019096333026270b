package prompttokens

import (
	"sort"
	"strings"
	"sync/atomic"

	"github.com/kvrouter/kvrouter/messages/serving"
)

// Target is one engine a model is served by, as registered: where its
// OpenAI surface is (the registration's serving endpoint) and the block
// size kvrouter hashes its prompts with.
type Target struct {
	Model     string
	URL       string // http(s) base address
	BlockSize int
}

// Directory is the current set of Targets, replaced whole by its owner (a
// refresh from the worker registry) and read by every resolution without
// locking.
type Directory struct {
	snap atomic.Pointer[directorySnap]
}

type directorySnap struct {
	targets []Target
	byModel map[string][]string
}

// Set replaces the targets. A serving endpoint given as HOST:PORT becomes
// http://HOST:PORT; duplicates are dropped.
func (d *Directory) Set(targets []Target) {
	s := &directorySnap{byModel: map[string][]string{}}
	seen := map[[2]string]bool{}
	for _, t := range targets {
		if t.URL == "" {
			continue
		}
		t.URL = BaseURL(t.URL)
		if k := [2]string{t.Model, t.URL}; !seen[k] {
			seen[k] = true
			s.targets = append(s.targets, t)
			s.byModel[t.Model] = append(s.byModel[t.Model], t.URL)
		}
	}
	sort.Slice(s.targets, func(i, j int) bool {
		a, b := s.targets[i], s.targets[j]
		return a.Model < b.Model || a.Model == b.Model && a.URL < b.URL
	})
	for _, urls := range s.byModel {
		sort.Strings(urls)
	}
	d.snap.Store(s)
}

// Engines returns the base addresses serving model (for Options.Engines).
func (d *Directory) Engines(model string) []string {
	if s := d.snap.Load(); s != nil {
		return s.byModel[model]
	}
	return nil
}

// Targets returns every target, sorted by model and address.
func (d *Directory) Targets() []Target {
	if s := d.snap.Load(); s != nil {
		return s.targets
	}
	return nil
}

// BaseURL makes a serving endpoint an HTTP base address (package
// messages/serving: host:port gets http://); anything else, such as a URL
// with a path prefix, is kept without its trailing slash.
func BaseURL(endpoint string) string {
	if e, err := serving.Parse(endpoint); err == nil {
		return e.BaseURL()
	}
	return strings.TrimRight(endpoint, "/")
}
