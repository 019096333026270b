package service

// Event-less workers (Registration.Events "none"): no listener, no stream;
// the namespace's route actor keeps an approximate cache of each from its
// own decisions (actors/routing/predicted), which /workers shows.

import (
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// eventLessInfo completes an event-less rank's /workers entry: mode
// predictions, state approximate, the blocks the route actor predicts
// there and the cache size they are bounded by.
func (s *Service) eventLessInfo(k messages.WorkerKey, w *worker, ri api.RankInfo) api.RankInfo {
	ri.Mode, ri.State = api.ModePredictions, api.StateApproximate
	ri.CacheBlocks = w.reg.CacheBlocks
	if ri.CacheBlocks == 0 {
		ri.CacheBlocks = uint32(s.cfg.Predictions.EventLessBlocks)
	}
	rep, err := request[*routing.PredictionsReply](s, w.ns.route, &routing.PredictionsRequest{})
	if err != nil {
		ri.Warnings = append(ri.Warnings, "route actor not answering")
		return ri
	}
	ri.Blocks = uint64(rep.Blocks[k])
	return ri
}
