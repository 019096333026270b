package service

import (
	"context"
	"errors"
	"testing"

	"github.com/kvrouter/kvrouter/messages/api"
)

// A route whose RoomRule the router's choice would break fails with
// api.ErrRoomKept and books nothing: the loads show only the requests
// booked before, and the refused id routes later as a new one.
func TestRouteRefusedForRoomBooksNothing(t *testing.T) {
	svc := registered(t, "", "")
	ctx := context.Background()
	route := func(id string, rule api.RoomRule) error {
		_, err := svc.Route(ctx, api.RouteRequest{TokenIDs: []uint32{1, 2, 3, 4}, ModelName: "m", TenantID: "default",
			RequestID: id, KeepRoom: rule})
		return err
	}
	booked := func() int64 {
		t.Helper()
		loads, err := svc.Loads(ctx, api.LoadsFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, ns := range loads {
			for _, l := range ns.Loads {
				n += int64(l.ActiveRequests)
			}
		}
		return n
	}
	if err := route("a", api.RoomRule{Ranks: 1}); err != nil { // the other worker has room
		t.Fatal(err)
	}
	if err := route("b", api.RoomRule{Ranks: 2}); !errors.Is(err, api.ErrRoomKept) {
		t.Fatalf("two ranks kept besides the choice in a fleet of two: %v, want ErrRoomKept", err)
	}
	if n := booked(); n != 1 {
		t.Fatalf("%d requests booked, want a's alone", n)
	}
	if err := route("b", api.RoomRule{}); err != nil {
		t.Fatalf("the refused id routed again: %v", err)
	}
	if n := booked(); n != 2 {
		t.Fatalf("%d requests booked, want 2", n)
	}
}
