package main

import (
	"flag"
	"fmt"

	"github.com/kvrouter/kvrouter/actors/routing/disagg"
)

const disaggHelp = `
Prefill/decode disaggregation: a registration's role (POST /register's
role, --worker's role=, the workers file, the llm-d.ai/role pod label)
is prefill, decode or both (the default). In a (model, tenant) with
roles, the decode leg is chosen among decode and both workers by the
usual cost; --disagg decides whether a prefill worker prefills the
request remotely: auto (the default) splits unless the decode worker
already holds --disagg-max-decode-hit of the prompt or less than
--disagg-min-uncached-tokens of it is uncached; always splits whenever a
prefill worker is registered; never does not. A split /route answer
names the prefill leg (prefill_worker, with its serving endpoint and
SGLang bootstrap address), the prefill worker a failed prefill leg may
be retried on (prefill_alternate: the runner-up on another worker; the
proxy retries once, --proxy-prefill-retries) and why (disaggregation);
the endpoint picker sends x-prefiller-host-port. A namespace without
roles routes as before.
`

// disaggFlags are kvrouter serve's prefill/decode options (package
// actors/routing/disagg).
type disaggFlags struct {
	mode        *string
	minUncached *int
	maxHit      *float64
}

func addDisaggFlags(fs *flag.FlagSet) *disaggFlags {
	return &disaggFlags{
		mode: fs.String("disagg", disagg.ModeAuto.String(),
			"prefill/decode disaggregation in namespaces with prefill workers: auto (split when the decode worker holds too little of the prompt), always or never"),
		minUncached: fs.Int("disagg-min-uncached-tokens", disagg.DefaultMinUncachedTokens,
			"with --disagg auto: a request whose part the decode worker does not hold is shorter than this is prefilled locally"),
		maxHit: fs.Float64("disagg-max-decode-hit", disagg.DefaultMaxDecodeHit,
			"with --disagg auto: a request of which the decode worker already holds at least this fraction (0 to 1] is prefilled locally"),
	}
}

// config checks the flags and returns the decision's configuration.
func (f *disaggFlags) config() (disagg.Config, error) {
	m, err := disagg.ParseMode(*f.mode)
	if err != nil {
		return disagg.Config{}, fmt.Errorf("--disagg: %w", err)
	}
	c := disagg.Config{Mode: m, MinUncachedTokens: *f.minUncached, MaxDecodeHit: *f.maxHit}
	if err := c.Validate(); err != nil {
		return disagg.Config{}, fmt.Errorf("--disagg-min-uncached-tokens %d, --disagg-max-decode-hit %v: %w", *f.minUncached, *f.maxHit, err)
	}
	return c, nil
}
