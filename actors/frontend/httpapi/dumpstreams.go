package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// appendStreams appends `,"streams":[…]` (nothing for no streams).
func appendStreams(b []byte, streams []api.DumpStream) ([]byte, error) {
	if len(streams) == 0 {
		return b, nil
	}
	js, err := json.Marshal(streams)
	if err != nil {
		return b, err
	}
	return append(append(b, `,"streams":`...), js...), nil
}

// readStreams decodes a namespace's "streams", checking what a router
// loading them needs: an endpoint per stream, each (worker, dp_rank) once.
func readStreams(dec *json.Decoder) ([]api.DumpStream, error) {
	var streams []api.DumpStream
	if err := dec.Decode(&streams); err != nil {
		return nil, fmt.Errorf("streams: %w", err)
	}
	seen := map[messages.WorkerKey]bool{}
	for i, st := range streams {
		k := messages.WorkerKey{Worker: st.WorkerID, DpRank: st.DpRank}
		switch {
		case st.Endpoint == "":
			return nil, fmt.Errorf("streams: stream %d (worker %d rank %d) has no endpoint", i, k.Worker, k.DpRank)
		case seen[k]:
			return nil, fmt.Errorf("streams: worker %d rank %d listed twice", k.Worker, k.DpRank)
		}
		seen[k] = true
	}
	return streams, nil
}
