//go:build !race

package service

import (
	"context"
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// In a cluster (without -race: reach_cluster_test.go says why) a bound
// socket, a topic prefix and a pod of a socket shared by topic are
// refused as invalid: every host would bind the same port, and the
// cluster's registry follows one stream per entry. Nothing is registered.
func TestClusterRefusesSharedSockets(t *testing.T) {
	t.Parallel()
	h := startMembers(t, [2]string{"127.0.0.1:0", ""})[0]
	base := api.Registration{InstanceID: 10, Endpoint: "tcp://127.0.0.1:5557", ModelName: "llama", TenantID: api.DefaultTenant, BlockSize: 4}
	for name, change := range map[string]func(*api.Registration){
		"bind":       func(r *api.Registration) { r.Bind = true },
		"topic":      func(r *api.Registration) { r.Topic = "kv@" },
		"shared pod": func(r *api.Registration) { r.Bind, r.TopicPod = true, "10.0.0.5:8000" },
	} {
		reg := base
		change(&reg)
		err := h.Service.Register(context.Background(), reg)
		if !errors.Is(err, api.ErrInvalid) {
			t.Errorf("%s: err %v, want it refused as invalid", name, err)
		}
	}
	ws, err := h.Service.Workers(context.Background())
	if err != nil || len(ws) != 0 {
		t.Errorf("workers after the refusals: %+v, %v", ws, err)
	}
}
