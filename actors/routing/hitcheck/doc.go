// Package hitcheck checks the router's cache-hit predictions against what
// the engines report, per worker: for every request the request path
// relays, the cached tokens the router predicted when it routed the
// request (its overlap there) beside the cached tokens the engine says it
// served (usage.prompt_tokens_details.cached_tokens, read by
// actors/frontend/usage).
//
// A worker whose reported hits stay far below the predicted ones is
// mis-indexed: its events are being lost, or its hashing (block size,
// salt, LoRA seed, a changed tokenizer) does not match the router's, so
// the index says it holds prefixes it does not. Routing more of those
// prefixes to it makes things worse, not better: the router keeps
// sending cache-hungry requests to a worker that recomputes them. So a
// flagged worker's overlap is discounted in the cost (Verdict.Credit)
// until its reports agree again, and it is shown in /workers and the
// metrics so an operator can look at its stream.
//
// # The rule
//
// Over the last Window reports of a worker with predicted hits (reports
// where the router predicted nothing do not count: they tell nothing
// about the index), the ratio reported / predicted tokens is taken once
// the predicted tokens reach MinPredicted (a few requests' worth, so one
// odd request does not flag a worker). Below FlagBelow the worker is
// flagged, and its credit is that ratio (at least MinCredit: the index
// is still the best guess there is); it is cleared once the ratio is back
// at ClearAbove or more (hysteresis, so a worker near the line does not
// flap). An engine that reports more than was predicted (the index missed
// blocks, say while its stream recovers) is not flagged: under-prediction
// costs hits, not correctness.
//
// Why a window of counts and not a time-decayed average: the check is
// about the index's correctness per request, and a quiet worker's last
// reports stay as relevant as a busy one's; a window also makes "flagged
// within a bounded number of requests" exact (at most Window reports after
// its events start being lost, and usually far fewer).
//
// No peer router does this check: they trust their index (or their
// approximate tree) and never learn that it diverged from the engine.
//
// The Tracker is a pure state machine in plain Go types with no clock or
// locks; its owner (the route actor) feeds it and applies the verdicts.
// It holds at most MaxWorkers workers (reports for more are counted and
// dropped) and Window samples each.
package hitcheck
