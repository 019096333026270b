package registry

import (
	"encoding/binary"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/zeebo/xxh3"
)

// Owner is the member (host:port) that follows stream k among members:
// rendezvous hashing — the member with the highest hash of (member, k),
// ties by address. Every host computes it from the same member list, a
// host leaving moves only its own streams, one joining takes about 1/n
// of them. "" when members is empty.
func Owner(members []string, k messages.WorkerKey) string {
	var key [12]byte
	binary.LittleEndian.PutUint64(key[:8], uint64(k.Worker))
	binary.LittleEndian.PutUint32(key[8:], uint32(k.DpRank))
	best, bestScore := "", uint64(0)
	for _, m := range members {
		s := xxh3.HashSeed(key[:], xxh3.HashString(m))
		if best == "" || s > bestScore || (s == bestScore && m > best) {
			best, bestScore = m, s
		}
	}
	return best
}
