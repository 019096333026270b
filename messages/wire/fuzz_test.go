package wire

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

func cloneBatch(b *Batch) Batch {
	c := *b
	c.Events = make([]Event, len(b.Events))
	for i, ev := range b.Events {
		ev.BlockHashes = append([]uint64(nil), ev.BlockHashes...)
		ev.Tokens = append([]uint32(nil), ev.Tokens...)
		c.Events[i] = ev
	}
	return c
}

// FuzzDecode checks that no input panics, errors are classified, limits
// hold, and a reused decoder gives the same answer as a fresh one.
func FuzzDecode(f *testing.F) {
	for _, s := range wirefix.Seeds() {
		f.Add(s)
	}
	lim := Limits{MaxEvents: 64, MaxHashes: 64, MaxTokens: 256, MaxStringBytes: 64, MaxExtraItems: 64}
	reused := NewDecoder(lim, nil)
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := reused.Decode(payload)
		if err != nil {
			if !errors.Is(err, ErrNotBatch) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		first := cloneBatch(b)
		for i, ev := range first.Events {
			if len(ev.BlockHashes) > lim.MaxHashes || len(ev.Tokens) > lim.MaxTokens {
				t.Fatalf("event %d exceeds limits: %d hashes, %d tokens", i, len(ev.BlockHashes), len(ev.Tokens))
			}
			if ev.Reason == messages.ReasonNone && ev.Type == TypeUnknown {
				t.Fatalf("event %d accepted without a known tag", i)
			}
			if ev.Reason != messages.ReasonNone && ev.Detail == "" {
				t.Fatalf("event %d: reason %v without detail", i, ev.Reason)
			}
		}
		if first.Lost > 0 && first.Events[len(first.Events)-1].Reason == messages.ReasonNone {
			t.Fatal("events lost but the last decoded event is not marked")
		}
		again, err := NewDecoder(lim, nil).Decode(payload)
		if err != nil {
			t.Fatalf("fresh decoder failed where reused one succeeded: %v", err)
		}
		if second := cloneBatch(again); !reflect.DeepEqual(first, second) {
			t.Fatalf("reused and fresh decoders disagree:\n%+v\n%+v", first, second)
		}
	})
}
