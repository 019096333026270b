// Package zmtptest builds the bytes a hostile ZMTP 3.0 peer sends, for
// tests that play one against kvrouter's sockets: a greeting, a NULL
// handshake's READY and the header of a frame that declares any size.
package zmtptest

import "encoding/binary"

// Greeting is a ZMTP 3.0 greeting with the NULL mechanism (64 bytes).
func Greeting() []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return g
}

// Ready is the READY command frame of a NULL handshake for a socket of the
// given type ("PUB", "SUB", ...).
func Ready(socketType string) []byte {
	b := append([]byte{5}, "READY"...)
	b = append(append(b, 11), "Socket-Type"...)
	b = append(binary.BigEndian.AppendUint32(b, uint32(len(socketType))), socketType...)
	return append([]byte{0x04, byte(len(b))}, b...) // flags: command; short size
}

// LongHeader is the header of a last (no MORE) long frame declaring size
// bytes; flags are or-ed in (0x04: a command, 0x01: more frames follow).
func LongHeader(flags byte, size uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{flags | 0x02}, size)
}
