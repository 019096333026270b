package api

import (
	"context"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// FleetReader is what a Backend may also offer the fleet page (GET /ui):
// its read endpoint GET /decisions (the page reads the booked load from
// Selector's GET /loads). It is a separate interface so that a Backend
// without it still serves the rest of the API; /decisions then answers
// 404.
type FleetReader interface {
	// Decisions returns the latest routing decisions kept, newest first,
	// and how many were not kept (see DecisionLog).
	Decisions(ctx context.Context) (DecisionLog, error)
}

// DecisionLog is the body of GET /decisions. The record is bounded and
// lossy by design: Capacity decisions at most, and a decision that finds
// the record busy is not kept (Skipped counts those) rather than make a
// route request wait. The totals count every decision since the start,
// kept or not, from every front end (/route, the proxy, the picker):
// Recorded + Skipped decisions, their PromptTokens and the CachedTokens
// the index predicted for the chosen ranks (their ratio is the predicted
// hit rate, weighted by tokens).
type DecisionLog struct {
	Capacity     int        `json:"capacity"`
	Recorded     uint64     `json:"recorded"`
	Skipped      uint64     `json:"skipped"`
	PromptTokens uint64     `json:"prompt_tokens"`
	CachedTokens uint64     `json:"cached_tokens"`
	Decisions    []Decision `json:"decisions"`
}

// Decision is one routing decision as the fleet page shows it: when, in
// which namespace, for how long a prompt, the chosen rank with its
// overlap, session credit and cost (Logit: lower is better), and — when
// the request asked include_scores — the best-scored candidates (at most
// DecisionScores, lowest logit first; Candidates is how many were scored).
type Decision struct {
	At                  time.Time         `json:"at"`
	ModelName           string            `json:"model_name"`
	TenantID            string            `json:"tenant_id"`
	PromptTokens        int               `json:"prompt_tokens"`
	WorkerID            messages.WorkerID `json:"worker_id"`
	DpRank              messages.DpRank   `json:"dp_rank"`
	OverlapBlocks       uint32            `json:"overlap_blocks"`
	CachedTokens        uint64            `json:"cached_tokens"`
	SessionCreditBlocks uint32            `json:"session_credit_blocks,omitempty"`
	Logit               float64           `json:"logit"`
	Candidates          int               `json:"candidates"`
	Degraded            bool              `json:"degraded,omitempty"`
	Scores              []RouteScore      `json:"scores"`
}

// DecisionScores is how many candidate scores one Decision keeps.
const DecisionScores = 8
