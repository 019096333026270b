package requestpath

import (
	"github.com/kvrouter/kvrouter/actors/frontend/usage"
	"github.com/kvrouter/kvrouter/actors/routing/hitcheck"
	"github.com/kvrouter/kvrouter/messages"
)

// HitReporter is the part of a Backend that checks the router's
// predictions (actors/routing/hitcheck): a Backend that implements it is
// told, for each relayed answer whose engine reported usage, the cached
// tokens predicted and reported on the rank that served it.
type HitReporter interface {
	ReportHit(r hitcheck.Report)
}

// Results of the prediction check's reading of an answer (the
// hit_reports metric's labels).
const (
	HitReported = "reported" // the engine's cached_tokens went to the check
	HitNoUsage  = "no_usage" // the answer carried no cached_tokens
	// HitMoved: served by another rank than the router chose (a retry):
	// the prediction was for the first choice, so nothing is checked.
	HitMoved = "moved"
	// HitByLoad: routed without token ids (by load): nothing was
	// predicted.
	HitByLoad = "by_load"
	// HitSplit: the router split the request: the decode engine's cached
	// tokens may count the prompt it received from the prefill engine,
	// which is not its own cache, so nothing is checked.
	HitSplit = "split"
)

// hitCheck is what a Booking needs to check its prediction: the rank it
// was predicted on, the prompt's length, and whether it had tokens.
type hitCheck struct {
	predictedOn  messages.WorkerKey
	promptTokens uint64
	byLoad       bool
}

// EngineUsage reads the engine's reported cached tokens from the end of
// the answer relayed to the client (usage.Tail's bytes) and hands them,
// with what the router predicted, to the Backend's check. Call it once,
// when the answer ended; a Backend without a check ignores it.
func (b *Booking) EngineUsage(tail []byte) {
	rep, ok := b.path.be.(HitReporter)
	if !ok {
		return
	}
	result := HitReported
	n, found := usage.CachedTokens(tail)
	served := b.Worker()
	switch {
	case b.hits.byLoad:
		result = HitByLoad
	case b.Prefill != nil:
		result = HitSplit
	case !found:
		result = HitNoUsage
	case served != b.hits.predictedOn:
		result = HitMoved
	default:
		rep.ReportHit(hitcheck.Report{Key: served, Predicted: b.CachedTokens, Reported: n, PromptTokens: b.hits.promptTokens})
	}
	b.path.metrics.add("hit_reports", result, "", 1)
}
