package httpapi

import (
	"encoding/json"
	"fmt"

	"github.com/kvrouter/kvrouter/messages"
)

// DumpStream is one registered engine stream in a dump ("streams" in a
// namespace, before its events; readers of the reference's format ignore
// it): the registration, so a router loading the dump follows the same
// endpoints, and the stream's position — the publisher seq of the last
// engine batch whose events are in the dump, and whether the dumped state
// of it was exact — so it can resume the stream there instead of dropping
// what it loaded (kvrouter serve --bootstrap-from). Seq is absent when the
// position is unknown (nothing applied yet, or lost).
type DumpStream struct {
	WorkerID        messages.WorkerID `json:"worker_id"`
	DpRank          messages.DpRank   `json:"dp_rank"`
	Endpoint        string            `json:"endpoint"`
	ReplayEndpoint  string            `json:"replay_endpoint,omitempty"`
	LoraName        string            `json:"lora_name,omitempty"`
	ServingEndpoint string            `json:"serving_endpoint,omitempty"`
	Seq             *uint64           `json:"seq,omitempty"`
	Exact           bool              `json:"exact,omitempty"`
}

// appendStreams appends `,"streams":[…]` (nothing for no streams).
func appendStreams(b []byte, streams []DumpStream) ([]byte, error) {
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
func readStreams(dec *json.Decoder) ([]DumpStream, error) {
	var streams []DumpStream
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
