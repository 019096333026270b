package zmtpguard

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kvrouter/kvrouter/actors/zmtpguard/zmtptest"
)

// Stream pieces, as a ZMTP 3.x peer sends them.
var (
	greeting = zmtptest.Greeting
	long     = zmtptest.LongHeader
	ready    = zmtptest.Ready("PUB") // a NULL handshake's READY command
)

func short(flags byte, size int) []byte { return []byte{flags, byte(size)} }

func body(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestGuard(t *testing.T) {
	const max = 1000
	g := greeting()
	for _, c := range []struct {
		name  string
		max   uint64
		reads [][]byte // what each Read hands over, in order
		fails int      // the read that is refused; -1: none
	}{
		{"greeting split across reads", max,
			[][]byte{g[:1], g[1:10], g[10:63], cat(g[63:], short(0, 3)), body(3)}, -1},
		{"greeting and the first header in one read", max,
			[][]byte{cat(g, ready, short(0, 5)), body(5)}, -1},
		{"short frames of a 3-frame message", max,
			[][]byte{g, ready, short(flagMore, 6), body(6), short(flagMore, 8), body(8), short(0, 200), body(200)}, -1},
		{"empty frames", max,
			[][]byte{g, cat(short(flagMore, 0), short(flagMore, 0), short(0, 0), short(0, 1)), body(1)}, -1},
		{"a body and the next header in one read", max,
			[][]byte{g, short(0, 4), cat(body(4), short(0, 2), body(2), long(0, 300)), body(300)}, -1},
		{"a long frame under the cap", max,
			[][]byte{g, long(0, 999), body(500), body(499), short(0, 1), body(1)}, -1},
		{"a long header split across reads, under the cap", max,
			[][]byte{g, long(0, 700)[:2], long(0, 700)[2:5], long(0, 700)[5:], body(700)}, -1},
		{"a long header split across reads, over the cap", max,
			[][]byte{g, long(0, 1<<40)[:2], long(0, 1<<40)[2:5], long(0, 1<<40)[5:]}, 3},
		{"a long header read byte by byte, over the cap", max,
			[][]byte{g, {flagLong}, {0}, {0}, {0}, {0}, {0}, {0}, {0x03}, {0xe9}}, 9},
		{"a message exactly at the cap, then another", max,
			[][]byte{g, long(flagMore, 600), body(600), long(0, 400), body(400), long(0, 1000), body(1000)}, -1},
		{"a frame one byte over the cap", max,
			[][]byte{g, ready, long(0, max+1)}, 2},
		{"frames under the cap that together pass it", max,
			[][]byte{g, long(flagMore, 600), body(600), long(0, 401)}, 3},
		{"short frames that together pass the cap", 600,
			[][]byte{g, short(flagMore, 255), body(255), short(flagMore, 255), body(255), short(0, 91)}, 5},
		{"the largest size a header can declare", max,
			[][]byte{g, long(flagMore, 10), body(10), long(0, ^uint64(0))}, 3},
		{"a command over the cap", max,
			[][]byte{g, long(flagCommand, max+1)}, 1},
		{"a command during the handshake, before any message", max,
			[][]byte{g[:30], cat(g[30:], long(flagCommand, 1<<40))}, 1},
		{"a terabyte against the real cap", MaxMessageSize,
			[][]byte{g, ready, long(0, 1<<40)}, 2},
		{"exactly the real cap (the body need not come)", MaxMessageSize,
			[][]byte{g, ready, long(0, MaxMessageSize), body(10)}, -1},
		{"one byte over the real cap", MaxMessageSize,
			[][]byte{g, ready, long(0, MaxMessageSize+1)}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			gd := newGuard(c.max)
			fails := -1
			for i, p := range c.reads {
				if !gd.scan(p) {
					fails = i
					break
				}
			}
			if fails != c.fails {
				t.Fatalf("read %d refused, want %d (state %d, left %d, total %d)", fails, c.fails, gd.state, gd.left, gd.total)
			}
			if fails >= 0 && (gd.scan([]byte{0}) || gd.scan(nil)) {
				t.Error("a scan after the refusal passed")
			}
			// The verdict does not depend on how the stream is cut.
			all := cat(c.reads...)
			whole, bytewise := newGuard(c.max), newGuard(c.max)
			refusedBytewise := false
			for i := range all {
				if !bytewise.scan(all[i : i+1]) {
					refusedBytewise = true
					break
				}
			}
			if refused := !whole.scan(all); refused != (c.fails >= 0) || refusedBytewise != (c.fails >= 0) {
				t.Errorf("whole stream refused %v, byte by byte %v, want %v", refused, refusedBytewise, c.fails >= 0)
			}
		})
	}
}

func TestRefusalSays(t *testing.T) {
	g := newGuard(1000)
	if g.scan(cat(greeting(), long(flagMore, 600), body(600), long(flagCommand, ^uint64(0)))) {
		t.Fatal("not refused")
	}
	if got, want := g.refusal(), "command declaring 18446744073709551615 bytes over the cap of 1000"; got != want {
		t.Errorf("refusal %q, want %q", got, want)
	}
	g = newGuard(1000)
	g.scan(cat(greeting(), long(flagMore, 600), body(600), long(0, 401)))
	if got, want := g.refusal(), "message declaring 1001 bytes over the cap of 1000"; got != want {
		t.Errorf("refusal %q, want %q", got, want)
	}
}

// refusedAt is the guard's rule restated over a whole stream: the offset of
// the byte that completes the first header taking a message over max, or -1.
func refusedAt(s []byte, max uint64) int {
	i, total := greetingLen, uint64(0)
	for i < len(s) {
		flags := s[i]
		var size uint64
		end := i + 2
		if flags&flagLong != 0 {
			end = i + 9
			if end > len(s) {
				return -1
			}
			size = binary.BigEndian.Uint64(s[i+1 : end])
		} else if end <= len(s) {
			size = uint64(s[i+1])
		} else {
			return -1
		}
		if total+size > max || total+size < total {
			return end - 1
		}
		total += size
		if flags&flagMore == 0 {
			total = 0
		}
		if uint64(len(s)-end) < size {
			return -1
		}
		i = end + int(size)
	}
	return -1
}

// FuzzGuard checks the guard against refusedAt on any stream cut at any
// points: the read refused is the one holding the offending byte.
func FuzzGuard(f *testing.F) {
	f.Add(cat(greeting(), ready, long(0, 1<<40)), []byte{3, 70, 2})
	f.Add(cat(greeting(), long(flagMore, 600), body(600), long(0, 400), body(400)), []byte{64, 1, 8})
	f.Add(cat(greeting(), short(flagMore, 255), body(255), short(flagMore, 255), body(255), short(0, 255)), []byte{1})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		const max = 700
		want := refusedAt(stream, max)
		g := newGuard(max)
		at, k := 0, 0
		for at < len(stream) {
			n := len(stream) - at
			if k < len(cuts) {
				n = min(n, int(cuts[k])+1)
				k++
			}
			if !g.scan(stream[at : at+n]) {
				if want < at || want >= at+n {
					t.Fatalf("refused the read of [%d, %d), want the byte at %d", at, at+n, want)
				}
				return
			}
			at += n
		}
		if want >= 0 {
			t.Fatalf("not refused, want the byte at %d", want)
		}
	})
}
