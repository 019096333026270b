package zmtpguard

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
)

// loopConn is a connection whose peer sends a greeting and then msg over
// and over.
type loopConn struct {
	net.Conn
	head, msg []byte
	at        int
}

func (c *loopConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	n := copy(p, c.msg[c.at:])
	c.at = (c.at + n) % len(c.msg)
	return n, nil
}

// bufferedConn is the connection kvrouter read through before the guard:
// a buffer alone.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// readMsg reads one message from r as zmq4's Conn.read does: per frame the
// 2 header bytes, the rest of a long size, the body.
func readMsg(r io.Reader, hdr, body []byte) error {
	for more := true; more; {
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			return err
		}
		more = hdr[0]&flagMore != 0
		size := uint64(hdr[1])
		if hdr[0]&flagLong != 0 {
			if _, err := io.ReadFull(r, hdr[2:9]); err != nil {
				return err
			}
			size = binary.BigEndian.Uint64(hdr[1:9])
		}
		if _, err := io.ReadFull(r, body[:size]); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkRead reads KV-event-shaped messages ([topic, seq, payload])
// through the buffered connection kvrouter used before (buffered) and
// through a guarded connection (guarded): the difference is the guard's
// cost per message.
func BenchmarkRead(b *testing.B) {
	for _, payload := range []int{256, 4 << 10, 64 << 10} {
		msg := cat(short(flagMore, 26), body(26), short(flagMore, 8), body(8))
		if payload > 255 {
			msg = cat(msg, long(0, uint64(payload)), body(payload))
		} else {
			msg = cat(msg, short(0, payload), body(payload))
		}
		for _, mode := range []string{"buffered", "guarded"} {
			b.Run(fmt.Sprintf("payload=%d/%s", payload, mode), func(b *testing.B) {
				src := &loopConn{head: greeting(), msg: msg}
				var r io.Reader = &bufferedConn{src, bufio.NewReaderSize(src, readBuffer)}
				if mode == "guarded" {
					r = newConn(src)
				}
				hdr, buf := make([]byte, 9), make([]byte, payload)
				if _, err := io.ReadFull(r, make([]byte, greetingLen)); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(msg)))
				b.ReportAllocs()
				for b.Loop() {
					if err := readMsg(r, hdr, buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
