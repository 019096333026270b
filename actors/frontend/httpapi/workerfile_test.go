package httpapi

import (
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

func TestReadWorkerFile(t *testing.T) {
	regs, err := ReadWorkerFile(strings.NewReader(`[
		{"instance_id": 1, "endpoint": "tcp://10.0.0.5:5557", "model_name": "llama", "replay_endpoint": "tcp://10.0.0.5:5558", "block_size": 32},
		{"instance_id": 1, "dp_rank": 1, "endpoint": "tcp://10.0.0.5:5567", "model_name": "llama", "tenant_id": "t1", "lora_name": "ad"},
		{"instance_id": 2, "endpoint": "tcp://10.0.0.6:5557", "model_name": "llama", "engine": "sglang"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Registration{
		{InstanceID: 1, Endpoint: "tcp://10.0.0.5:5557", ModelName: "llama", TenantID: api.DefaultTenant, BlockSize: 32, ReplayEndpoint: "tcp://10.0.0.5:5558"},
		{InstanceID: 1, DpRank: 1, Endpoint: "tcp://10.0.0.5:5567", ModelName: "llama", TenantID: "t1", LoraName: "ad"},
		{InstanceID: 2, Endpoint: "tcp://10.0.0.6:5557", ModelName: "llama", TenantID: api.DefaultTenant, Engine: "sglang"},
	}
	if len(regs) != len(want) {
		t.Fatalf("got %d registrations, want %d", len(regs), len(want))
	}
	for i := range want {
		if regs[i] != want[i] {
			t.Fatalf("entry %d = %+v, want %+v", i, regs[i], want[i])
		}
	}
	if regs, err := ReadWorkerFile(strings.NewReader(`[]`)); err != nil || len(regs) != 0 {
		t.Fatalf("empty file: %v, %v", regs, err)
	}
}

func TestReadWorkerFileErrors(t *testing.T) {
	ok := `{"instance_id": 1, "endpoint": "tcp://h:1", "model_name": "m"}`
	for _, tc := range []struct{ name, body, want string }{
		{"not an array", `{"instance_id": 1}`, "JSON array"},
		{"not JSON", `[{"instance_id": 1,`, "JSON array"},
		{"missing instance", `[` + ok + `, {"endpoint": "tcp://h:1", "model_name": "m"}]`, "entry 1: instance_id is required"},
		{"missing endpoint", `[{"instance_id": 1, "model_name": "m"}]`, "entry 0: endpoint"},
		{"no transport", `[{"instance_id": 1, "endpoint": "h:1", "model_name": "m"}]`, "entry 0: "},
		{"unknown field", `[{"instance_id": 1, "endpoint": "tcp://h:1", "model_name": "m", "adapter": "x"}]`, "entry 0: "},
		{"unknown engine", `[{"instance_id": 1, "endpoint": "tcp://h:1", "model_name": "m", "engine": "x"}]`, `entry 0: engine "x" is not known: want one of auto,`},
		{"negative id", `[{"instance_id": -1, "endpoint": "tcp://h:1", "model_name": "m"}]`, "entry 0: "},
		{"zero block size", `[{"instance_id": 1, "endpoint": "tcp://h:1", "model_name": "m", "block_size": 0}]`, "entry 0: block_size"},
		{"too large", `[` + strings.Repeat(" ", MaxWorkerFileBytes) + `]`, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regs, err := ReadWorkerFile(strings.NewReader(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (regs %v), want it to contain %q", err, regs, tc.want)
			}
		})
	}
}
