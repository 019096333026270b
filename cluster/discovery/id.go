package discovery

import (
	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// idBit marks the instance ids discovery hands out (bit 52): ids below
// 2^52 are left to registrations made by hand.
const idBit = 1 << 52

// WorkerID is the instance id of pod namespace/name: bit 52 set, the low
// 52 bits a hash of the name, so below 2^53 (exact in JSON doubles).
func WorkerID(namespace, name string) messages.WorkerID {
	h := xxh3.HashString(namespace + "/" + name)
	return messages.WorkerID(idBit | h&(idBit-1))
}

// Discovered reports whether id is in the range WorkerID hands out.
func Discovered(id messages.WorkerID) bool { return uint64(id)>>52 == 1 }
