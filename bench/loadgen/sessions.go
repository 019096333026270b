package loadgen

import (
	"slices"
	"strconv"
)

// InferSessions names each request's conversation: a request whose hash ids
// start with all of an earlier request's hash ids continues that request's
// session (the longest such earlier request wins); any other request opens
// a new session, named "s<index of its first request>". An empty id list
// always opens a session. The result has one name per request.
func InferSessions(ids [][]uint64) []string {
	byKey := map[uint64][]int{} // prefix key → requests with exactly those ids (latest per distinct list)
	out := make([]string, len(ids))
	for i, h := range ids {
		out[i] = "s" + strconv.Itoa(i)
		key, best := uint64(prefixSeed), -1
		for k, id := range h {
			key = mixKey(key, id)
			for _, j := range byKey[key] {
				if len(ids[j]) == k+1 && slices.Equal(ids[j], h[:k+1]) {
					best = j
				}
			}
		}
		if best >= 0 {
			out[i] = out[best]
		}
		if len(h) > 0 {
			byKey[key] = recordLatest(byKey[key], ids, i)
		}
	}
	return out
}

// recordLatest files request i under its key, replacing an earlier request
// with the same ids (both are in the same session; the list stays short).
func recordLatest(list []int, ids [][]uint64, i int) []int {
	for n, j := range list {
		if slices.Equal(ids[j], ids[i]) {
			list[n] = i
			return list
		}
	}
	return append(list, i)
}

const prefixSeed = 0x6b76726f75746572 // "kvrouter"

// mixKey folds one more id into a prefix key (a splitmix64 round).
func mixKey(key, id uint64) uint64 {
	x := key ^ (id + 0x9e3779b97f4a7c15 + key<<6 + key>>2)
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
