package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

// tokenizerFlags is --tokenizer, repeatable: MODEL=PATH, or PATH alone for
// the --model model.
type tokenizerFlags []tokenizerFlag

type tokenizerFlag struct{ model, path string }

func (f *tokenizerFlags) String() string {
	var parts []string
	for _, t := range *f {
		parts = append(parts, t.model+"="+t.path)
	}
	return strings.Join(parts, ",")
}

func (f *tokenizerFlags) Set(v string) error {
	model, path, ok := strings.Cut(v, "=")
	if !ok {
		model, path = "", v
	}
	if path == "" {
		return fmt.Errorf("want MODEL=PATH or PATH")
	}
	*f = append(*f, tokenizerFlag{model, path})
	return nil
}

// prompts is the request path's token-id side: the resolver the front ends
// ask, the directory of engines it asks (refreshed from the registered
// workers' serving endpoints), and the parity guard.
type prompts struct {
	resolver *prompttokens.Resolver
	dir      *prompttokens.Directory
	guard    *prompttokens.Guard
}

// workerLister is the part of the service the directory refresh reads.
type workerLister interface {
	Workers(context.Context) ([]api.WorkerInfo, error)
}

// newPrompts loads every --tokenizer file (a bad one fails the start).
func newPrompts(flags tokenizerFlags, defaultModel string, timeout time.Duration, logger *slog.Logger) (*prompts, error) {
	p := &prompts{dir: &prompttokens.Directory{}}
	p.resolver = prompttokens.New(prompttokens.Options{Engines: p.dir.Engines, Timeout: timeout})
	for _, f := range flags {
		model := f.model
		if model == "" {
			model = defaultModel
		}
		tk, err := tokenizer.Load(f.path)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer %s: %w", model, err)
		}
		p.resolver.SetTokenizer(model, tk)
		logger.Info("tokenizer loaded", "model", model, "path", f.path, "vocab", tk.VocabSize())
	}
	p.guard = prompttokens.NewGuard(p.resolver, p.dir, logger)
	return p, nil
}

// run keeps the directory in step with the registered workers (every
// refresh) and runs the parity guard when an engine appears and every
// parityEvery, until ctx ends.
func (p *prompts) run(ctx context.Context, workers workerLister, refresh, parityEvery time.Duration) {
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	var st refreshState
	for {
		p.refresh(ctx, workers, &st, parityEvery)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// refreshState is what run remembers between refreshes.
type refreshState struct {
	known     []prompttokens.Target
	lastCheck time.Time
}

// refresh is one step of run.
func (p *prompts) refresh(ctx context.Context, workers workerLister, st *refreshState, parityEvery time.Duration) {
	list, err := workers.Workers(ctx)
	if err != nil {
		return
	}
	targets := servingTargets(list)
	p.dir.Set(targets)
	if now := time.Now(); !slices.Equal(targets, st.known) || now.Sub(st.lastCheck) >= parityEvery {
		p.guard.Check(ctx)
		st.known, st.lastCheck = targets, now
	}
}

// servingTargets lists each rank that has a serving endpoint, in order.
func servingTargets(list []api.WorkerInfo) []prompttokens.Target {
	var out []prompttokens.Target
	for _, w := range list {
		for _, r := range w.Ranks {
			if r.ServingEndpoint != "" {
				out = append(out, prompttokens.Target{Model: r.ModelName, URL: prompttokens.BaseURL(r.ServingEndpoint), BlockSize: int(r.BlockSize)})
			}
		}
	}
	slices.SortFunc(out, func(a, b prompttokens.Target) int {
		return strings.Compare(a.Model+"\x00"+a.URL, b.Model+"\x00"+b.URL)
	})
	return slices.Compact(out)
}

// rankWarnings gives /workers the parity guard's warnings for a rank.
func (p *prompts) rankWarnings(r api.RankInfo) []string {
	if r.ServingEndpoint == "" {
		return nil
	}
	return p.guard.Warnings(r.ModelName, r.ServingEndpoint)
}

// metrics are the resolver's and the guard's, for /metrics.
func (p *prompts) metrics() []func(io.Writer) error {
	return []func(io.Writer) error{p.resolver.WriteMetrics, p.guard.WriteMetrics}
}
