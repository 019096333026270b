package routerevent

import (
	"testing"

	"github.com/kvrouter/kvrouter/messages"
)

// benchEvent is a typical coalesced store: 16 blocks with a parent and a
// session.
func benchEvent() messages.RouterEvent {
	ev := goldenStored
	ev.Event.Blocks = nil
	for i := range 16 {
		ev.Event.Blocks = append(ev.Event.Blocks, messages.StoredBlock{
			BlockHash:  messages.ExternalHash(0x9e3779b97f4a7c15 * uint64(i+1)),
			TokensHash: messages.LocalHash(0xc2b2ae3d27d4eb4f * uint64(i+1)),
		})
	}
	return ev
}

func BenchmarkEncode(b *testing.B) {
	ev := benchEvent()
	dst := Encode(nil, ev)
	b.SetBytes(int64(len(dst)))
	b.ReportAllocs()
	for b.Loop() {
		dst = Encode(dst[:0], ev)
	}
}

func BenchmarkDecoder(b *testing.B) {
	in := Encode(nil, benchEvent())
	d := NewDecoder(Limits{})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is the convenience function: the event owns its memory.
func BenchmarkDecode(b *testing.B) {
	in := Encode(nil, benchEvent())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecoderRemoved(b *testing.B) {
	ev := goldenRemoved
	for i := range 128 {
		ev.Event.Removed = append(ev.Event.Removed, messages.ExternalHash(0x9e3779b97f4a7c15*uint64(i+1)))
	}
	in := Encode(nil, ev)
	d := NewDecoder(Limits{})
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}
