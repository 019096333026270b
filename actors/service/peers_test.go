package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A peer registered on a cold router (POST /register_peer) is a source of
// dumps for recovery: the router loads the peer's index and follows its
// engines; the peer is listed, deregistering it twice is 404 the second
// time, and a router that already follows workers only lists a new peer.
func TestRegisteredPeerRecoversAColdRouter(t *testing.T) {
	a, aURL := newRouter(t)
	engines := []*simengine.Engine{newEngine(t, a, 1, 0), newEngine(t, a, 2, 0)}
	for i, e := range engines {
		serve(t, e, 100*i, 12)
	}
	caughtUp := func(svc *Service) func() (bool, string) {
		return func() (bool, string) {
			for i, e := range engines {
				if got := blocks(t, svc, i+1); !slices.Equal(got, truth(e)) {
					return false, fmt.Sprintf("worker %d: index %d blocks, engine %d", i+1, len(got), len(truth(e)))
				}
			}
			return true, ""
		}
	}
	beatUntil(t, engines, "peer caught up", caughtUp(a))

	ctx := context.Background()
	b, _ := newRouter(t)
	if err := b.RegisterPeer(ctx, aURL+"/"); err != nil {
		t.Fatal(err)
	}
	beatUntil(t, engines, "cold router recovered from the registered peer", func() (bool, string) {
		if _, err := b.lookup("llama", api.DefaultTenant); err != nil {
			return false, err.Error()
		}
		return caughtUp(b)()
	})
	if peers, _ := b.Peers(ctx); !slices.Equal(peers, []string{aURL}) {
		t.Errorf("peers %v, want [%s]", peers, aURL)
	}
	// b follows workers now: another peer is listed, not loaded.
	if err := b.RegisterPeer(ctx, "http://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeregisterPeer(ctx, aURL); err != nil {
		t.Fatal(err)
	}
	if err := b.DeregisterPeer(ctx, aURL); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("second deregister: %v, want ErrNotFound", err)
	}
	if err := b.RegisterPeer(ctx, "ftp://x"); !errors.Is(err, api.ErrInvalid) {
		t.Errorf("ftp peer: %v, want ErrInvalid", err)
	}
	if peers, _ := b.Peers(ctx); !slices.Equal(peers, []string{"http://127.0.0.1:1"}) {
		t.Errorf("peers %v", peers)
	}
}
