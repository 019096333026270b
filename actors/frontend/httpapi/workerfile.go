package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/kvrouter/kvrouter/messages/api"
)

// MaxWorkerFileBytes caps a worker file (ReadWorkerFile): 16 MiB holds
// ~100 k registrations.
const MaxWorkerFileBytes = 16 << 20

// ReadWorkerFile decodes a worker file — a JSON array of POST /register
// bodies — and checks every entry exactly as POST /register does (required
// fields, names, endpoints, unknown fields). An error names the entry by
// its position (from 0) and says what is wrong; nothing is returned then.
//
//	[{"instance_id": 1, "endpoint": "tcp://10.0.0.5:5557", "model_name": "llama",
//	  "replay_endpoint": "tcp://10.0.0.5:5558", "block_size": 16},
//	 {"instance_id": 1, "dp_rank": 1, "endpoint": "tcp://10.0.0.5:5567", "model_name": "llama"}]
func ReadWorkerFile(r io.Reader) ([]api.Registration, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxWorkerFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the worker file: %w", err)
	}
	if len(body) > MaxWorkerFileBytes {
		return nil, fmt.Errorf("the worker file is larger than %d bytes", MaxWorkerFileBytes)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("the worker file must be a JSON array of /register bodies: %w", err)
	}
	out := make([]api.Registration, 0, len(entries))
	for i, raw := range entries {
		var b registerBody
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			return nil, fmt.Errorf("worker file entry %d: %s", i, classifyDecode(err, MaxWorkerFileBytes).msg)
		}
		reg, apiErr := b.registration(limits{})
		if apiErr != nil {
			return nil, fmt.Errorf("worker file entry %d: %s", i, apiErr.msg)
		}
		out = append(out, reg)
	}
	return out, nil
}
