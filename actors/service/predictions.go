package service

// Predictions (actors/routing/predicted) as the service shows them: the
// metrics, and event-less workers (Registration.Events "none": no
// listener, no stream; the namespace's route actor keeps an approximate
// cache of each from its own decisions) in /workers.

import (
	"fmt"
	"io"

	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// checkEventLess checks an event-less registration's cache size.
func checkEventLess(reg api.Registration) error {
	if reg.CacheBlocks > predicted.MaxEventLessBlocks {
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "cache_blocks %d: at most %d", reg.CacheBlocks, predicted.MaxEventLessBlocks)
	}
	return nil
}

// eventLess reports whether k is a registered event-less worker.
func (s *Service) eventLess(k messages.WorkerKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.workers[k]
	return w != nil && w.reg.EventLess()
}

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

// WritePredictionMetrics writes the route actors' prediction figures,
// summed over namespaces, in the Prometheus text format:
//
//	kvrouter_predicted_blocks                 (worker, block) predictions held
//	kvrouter_predictions_total{outcome}       recorded (made or refreshed on route), confirmed
//	                                          (by a BlockStored), killed (BlockRemoved, a clear),
//	                                          expired (TTL), evicted (cap or capacity, LRU)
//	kvrouter_predicted_wait_withheld_total    candidates whose predicted blocks earned no credit:
//	                                          waiting there was slower than a full prefill
//	                                          elsewhere (--predict-wait-check)
//
// A route actor that does not answer in time is left out of the sums (its
// namespace's figures dip for that scrape) and counted in
// kvrouter_prediction_read_errors_total.
func (s *Service) WritePredictionMetrics(w io.Writer) error {
	var sum predicted.Stats
	var withheld uint64
	failed := 0
	for _, ns := range s.sortedSpaces() {
		rep, err := request[*routing.PredictionsReply](s, ns.route, &routing.PredictionsRequest{})
		if err != nil {
			failed++
			continue
		}
		st := rep.Stats
		sum.Blocks += st.Blocks
		sum.Recorded += st.Recorded
		sum.Confirmed += st.Confirmed
		sum.Killed += st.Killed
		sum.Expired += st.Expired
		sum.Evicted += st.Evicted
		withheld += rep.WaitWithheld
	}
	s.predictionReadErrors.Add(int64(failed))
	_, err := fmt.Fprintf(w, `# HELP kvrouter_predicted_blocks (worker, block) predictions held by the route actors (predict-on-route and event-less workers).
# TYPE kvrouter_predicted_blocks gauge
kvrouter_predicted_blocks %d
# HELP kvrouter_predictions_total Predicted blocks by outcome: recorded on route, confirmed by BlockStored, killed by BlockRemoved or a clear, expired, evicted by the cap.
# TYPE kvrouter_predictions_total counter
kvrouter_predictions_total{outcome="recorded"} %d
kvrouter_predictions_total{outcome="confirmed"} %d
kvrouter_predictions_total{outcome="killed"} %d
kvrouter_predictions_total{outcome="expired"} %d
kvrouter_predictions_total{outcome="evicted"} %d
# HELP kvrouter_predicted_wait_withheld_total Candidates whose predicted blocks earned no credit because waiting behind their queued prefill was slower than a full prefill on the least-queued worker.
# TYPE kvrouter_predicted_wait_withheld_total counter
kvrouter_predicted_wait_withheld_total %d
# HELP kvrouter_prediction_read_errors_total Scrapes a route actor did not answer in time.
# TYPE kvrouter_prediction_read_errors_total counter
kvrouter_prediction_read_errors_total %d
`, sum.Blocks, sum.Recorded, sum.Confirmed, sum.Killed, sum.Expired, sum.Evicted, withheld, s.predictionReadErrors.Load())
	return err
}
