package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath/guard"
)

// guardFlags are kvrouter serve's request-path protections, shared by the
// proxy and the picker: circuit breakers, retries, rate limits, flow
// control, health checks.
type guardFlags struct {
	breakerOff                   bool
	failures, minSamples         int
	errorRate                    float64
	window, coolDown             time.Duration
	probes, successes            int
	retryRatio                   float64
	retryMin                     int
	backoff, backoffMax          time.Duration
	rps, rpsBurst, tps, tpsBurst float64
	limitsFile                   string
	flow                         flowFlags
	health                       healthFlags
}

func addGuardFlags(fs *flag.FlagSet) *guardFlags {
	f := &guardFlags{}
	fs.BoolVar(&f.breakerOff, "no-breaker", false, "turn the circuit breakers off (the proxy and the picker: one per serving endpoint)")
	fs.IntVar(&f.failures, "breaker-failures", guard.DefaultBreakerFailures, "open a serving endpoint's breaker after this many consecutive failures (connect errors, 5xx, resets before the first byte)")
	fs.Float64Var(&f.errorRate, "breaker-error-rate", guard.DefaultBreakerErrorRate, "also open it when failures make this share of its answers over --breaker-window (negative: off)")
	fs.IntVar(&f.minSamples, "breaker-min-samples", guard.DefaultBreakerMinSamples, "answers in the window before --breaker-error-rate counts")
	fs.DurationVar(&f.window, "breaker-window", guard.DefaultBreakerWindow, "window of --breaker-error-rate")
	fs.DurationVar(&f.coolDown, "breaker-cool-down", guard.DefaultBreakerCoolDown, "an open breaker lets no request through for this long, then half-opens")
	fs.IntVar(&f.probes, "breaker-probes", guard.DefaultBreakerProbes, "requests a half-open breaker lets through at once")
	fs.IntVar(&f.successes, "breaker-successes", guard.DefaultBreakerSuccesses, "probes that must succeed to close a half-open breaker (one failure opens it again)")
	fs.Float64Var(&f.retryRatio, "retry-budget", guard.DefaultBudgetRatio, "proxy: retries on the next-best worker stay under this share of the requests over 10 s (negative: none past --retry-budget-min)")
	fs.IntVar(&f.retryMin, "retry-budget-min", guard.DefaultBudgetMin, "proxy: retries allowed per 10 s whatever the share (negative: none)")
	fs.DurationVar(&f.backoff, "retry-backoff", guard.DefaultBackoffInitial, "proxy: wait before the first retry, ×1.5 for each next one, ±20% jitter")
	fs.DurationVar(&f.backoffMax, "retry-backoff-max", guard.DefaultBackoffMax, "proxy: longest wait before a retry")
	fs.Float64Var(&f.rps, "rate-limit-rps", 0, "requests a second per key (fairness-id header, else tenant) for keys the --rate-limits file does not name (0: no limit)")
	fs.Float64Var(&f.rpsBurst, "rate-limit-rps-burst", 0, "burst of --rate-limit-rps (0: one second's worth)")
	fs.Float64Var(&f.tps, "rate-limit-prompt-tps", 0, "prompt tokens a second per key, as --rate-limit-rps (0: no limit)")
	fs.Float64Var(&f.tpsBurst, "rate-limit-prompt-tokens-burst", 0, "burst of --rate-limit-prompt-tps (0: one second's worth)")
	fs.StringVar(&f.limitsFile, "rate-limits", "", `JSON file of rate limits per key: {"default": LIMIT, "keys": {"KEY": LIMIT}}, LIMIT {"requests_per_second", "request_burst", "prompt_tokens_per_second", "prompt_token_burst"}; its default replaces the --rate-limit-* flags`)
	f.flow.add(fs)
	f.health.add(fs)
	return f
}

// build checks the flags and returns the Guard both front ends share;
// pool is --inference-pool (NAMESPACE/NAME: the objectives of other
// pools are left out), discover --discover.
func (f *guardFlags) build(pool, discover string) (*requestpath.Guard, error) {
	switch {
	case f.failures < 1:
		return nil, fmt.Errorf("--breaker-failures %d: want 1 or more", f.failures)
	case f.minSamples < 1 || f.probes < 1 || f.successes < 1:
		return nil, fmt.Errorf("--breaker-min-samples, --breaker-probes, --breaker-successes: want 1 or more")
	case f.window <= 0 || f.coolDown <= 0 || f.backoff <= 0 || f.backoffMax < f.backoff:
		return nil, fmt.Errorf("--breaker-window, --breaker-cool-down, --retry-backoff must be positive, --retry-backoff-max at least --retry-backoff")
	case f.errorRate == 0:
		return nil, fmt.Errorf("--breaker-error-rate 0 would open on any failure: want a share in (0, 1], or negative for off")
	}
	limits := requestpath.Limits{Default: requestpath.Limit{RequestsPerSecond: f.rps, RequestBurst: f.rpsBurst,
		PromptTokensPerSecond: f.tps, PromptTokenBurst: f.tpsBurst}}
	if f.limitsFile != "" {
		var err error
		if limits, err = requestpath.LoadLimits(f.limitsFile); err != nil {
			return nil, fmt.Errorf("--rate-limits: %w", err)
		}
	}
	_, poolName, _ := strings.Cut(pool, "/")
	if f.flow.watch && (pool == "" || discover != "kubernetes") {
		return nil, fmt.Errorf("--watch-inference-objectives needs --discover kubernetes and --inference-pool (the objectives of that pool are read)")
	}
	flow, err := f.flow.config(poolName)
	if err != nil {
		return nil, err
	}
	health, err := f.health.config()
	if err != nil {
		return nil, err
	}
	return requestpath.NewGuard(requestpath.GuardConfig{BreakerOff: f.breakerOff, Flow: flow, Health: health,
		Breaker: guard.BreakerConfig{Failures: f.failures, ErrorRate: f.errorRate, MinSamples: f.minSamples, Window: f.window,
			CoolDown: f.coolDown, Probes: f.probes, Successes: f.successes},
		RetryRatio: f.retryRatio, RetryMin: f.retryMin, Backoff: guard.Backoff{Initial: f.backoff, Max: f.backoffMax},
		Limits: limits})
}
