package routerevent

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

func cloneEvent(ev messages.RouterEvent) messages.RouterEvent {
	ev.Event.Blocks = slices.Clone(ev.Event.Blocks)
	ev.Event.Removed = slices.Clone(ev.Event.Removed)
	return ev
}

// FuzzDecode checks that no input panics, every error is classified, a
// reused decoder agrees with a fresh one, and whatever Decode accepts is
// publishable and survives Encode → Decode unchanged, with Encode at a fixed
// point.
func FuzzDecode(f *testing.F) {
	for _, g := range goldens() {
		f.Add(unhex(f, g.hex...))
	}
	noSession := goldenStored
	noSession.SessionID = ""
	f.Add(Encode(nil, noSession))
	f.Add(positionalEvent(fx().Array(4).Uint(7, 0).Str("host_pinned")).Str("s").Bytes())
	f.Add(positionalEvent(fx().Array(3).Uint(7, 0).Str("device")).Bytes())
	f.Add(fx().Array(2).Uint(7, 0).Array(2).Uint(42, 0).Str("cleared").Bytes())
	f.Add(namedEvent(fx().Map(4).Str("residency_domain").Str("worker").Str("worker_id").Uint(7, 0).
		Str("session_id").Nil().Str("event")).Bytes())
	f.Add(nest(40).Bytes())

	reused := NewDecoder(Limits{})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := reused.Decode(in)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) &&
				!errors.Is(err, ErrLimit) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error %v", err)
			}
			if _, err2 := Decode(in); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("fresh decoder disagrees: %v vs %v", err2, err)
			}
			return
		}
		ev := cloneEvent(got)
		if fresh, err := Decode(in); err != nil || !reflect.DeepEqual(fresh, ev) {
			t.Fatalf("fresh decoder disagrees: %+v, %v vs %+v", fresh, err, ev)
		}
		if err := Validate(ev); err != nil {
			t.Fatalf("Decode accepted an unpublishable event: %v", err)
		}
		out := Encode(nil, ev)
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode(ev)): %v", err)
		}
		if !reflect.DeepEqual(again, ev) {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", again, ev)
		}
		if out2 := Encode(nil, again); !bytes.Equal(out2, out) {
			t.Fatal("Encode is not at a fixed point")
		}
	})
}
