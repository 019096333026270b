package httpapi

import (
	"context"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// cannedInstances is /query's per-instance tier breakdown beside
// cannedResult's scores.
func cannedInstances() map[messages.WorkerID]api.TierReach {
	return map[messages.WorkerID]api.TierReach{
		1:                    {LongestMatched: 48, GPU: 32, DP: map[string]uint64{"0": 32}, CPU: 48, Disk: 48},
		18446744073709551615: {LongestMatched: 48, GPU: 48, DP: map[string]uint64{"0": 48, "1": 16}, CPU: 48, Disk: 48},
		7:                    {DP: map[string]uint64{"0": 0}},
	}
}

// The fake's selection service (api.Selector), recording every call as
// the Backend's methods do. Model names as in modelErr; selection id
// "dup" → conflict; output-block id "nope" → not found.

var _ api.Selector = (*fakeBackend)(nil)

func (f *fakeBackend) Select(_ context.Context, req api.SelectRequest) (api.SelectResult, error) {
	f.record("Select", req)
	if err := modelErr(req.ModelName); err != nil {
		return api.SelectResult{}, err
	}
	if req.SelectionID == "dup" {
		return api.SelectResult{}, api.Errorf(api.ErrConflict, "duplicate_request", "request id %q is already routed", req.SelectionID)
	}
	return api.SelectResult{SelectionID: req.SelectionID, ModelName: req.ModelName, RoutingGroup: req.TenantID,
		WorkerID: 18446744073709551615, DpRank: 1, Endpoint: "http://10.0.0.2:8000", BlockSize: 16,
		Overlap:                api.TierReach{LongestMatched: 128, GPU: 64, DP: map[string]uint64{"0": 32, "1": 64}, CPU: 96, Disk: 128},
		EffectivePrefillTokens: 384, PotentialDecodeBlocks: 40,
		WorkerLoad: &api.WorkerLoad{ActivePrefillTokens: 900}}, nil
}

func (f *fakeBackend) OutputBlock(_ context.Context, req api.OutputBlockRequest) error {
	f.record("OutputBlock", req)
	return requestErr(req.ID)
}

func (f *fakeBackend) Loads(_ context.Context, filter api.LoadsFilter) ([]api.NamespaceLoads, error) {
	f.record("Loads", filter)
	if err := modelErr(filter.ModelName); err != nil {
		return nil, err
	}
	return []api.NamespaceLoads{
		{ModelName: "llama", RoutingGroup: "default", Loads: []api.PotentialLoad{
			{WorkerID: 1, DpRank: 0, PotentialPrefillTokens: 100, PotentialDecodeBlocks: 7, ActiveRequests: 2},
			{WorkerID: 2, DpRank: 0}}},
		{ModelName: "llama", RoutingGroup: "acme"},
	}, nil
}

func (f *fakeBackend) PotentialLoads(_ context.Context, req api.SelectRequest) ([]api.PotentialLoad, error) {
	f.record("PotentialLoads", req)
	if err := modelErr(req.ModelName); err != nil {
		return nil, err
	}
	return []api.PotentialLoad{{WorkerID: 1, DpRank: 0, PotentialPrefillTokens: 164, PotentialDecodeBlocks: 12, ActiveRequests: 2},
		{WorkerID: 2, DpRank: 3, PotentialPrefillTokens: 16, PotentialDecodeBlocks: 5}}, nil
}

func (f *fakeBackend) OverlapScores(_ context.Context, req api.SelectRequest) (api.OverlapScores, error) {
	f.record("OverlapScores", req)
	if err := modelErr(req.ModelName); err != nil {
		return api.OverlapScores{}, err
	}
	return api.OverlapScores{BlockSize: 16, NumBlocks: 4, Workers: []api.WorkerOverlap{
		{WorkerID: 1, DpRank: 0, DeviceBlocks: 1, HostPinnedBlocks: 3, DiskBlocks: 4, HostPinnedExtensionBlocks: 2, DiskExtensionBlocks: 1, RouterCreditBlocks: 4},
		{WorkerID: 2, DpRank: 0}}}, nil
}

func (f *fakeBackend) Reserve(_ context.Context, req api.ReserveRequest) (api.ReserveResult, error) {
	f.record("Reserve", req)
	if err := modelErr(req.ModelName); err != nil {
		return api.ReserveResult{}, err
	}
	if req.SelectionID == "gone" {
		return api.ReserveResult{}, api.Errorf(api.ErrNotFound, "no_pending_selection", "no pending selection %q", req.SelectionID)
	}
	return api.ReserveResult{SelectionID: req.SelectionID, ModelName: req.ModelName, RoutingGroup: req.TenantID,
		WorkerID: req.WorkerID + 1, DpRank: req.DpRank, Endpoint: "http://10.0.0.2:8000"}, nil
}
