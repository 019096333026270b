package routing

// PendingStatsRequest asks a route actor for its pending selections'
// counters and size; it answers *PendingStatsReply. /metrics asks once
// per namespace at each scrape.
type PendingStatsRequest struct{}

// PendingStatsReply is a route actor's pending selections: the counters
// (all only grow) and the entries held now.
type PendingStatsReply struct {
	Stats PendingStats
	Held  int
}
