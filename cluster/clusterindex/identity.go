package clusterindex

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is the cluster kind of shard grains.
const Kind = "kvrouter-shard"

// Identity is the grain identity of a namespace's shard: "<namespace>/<shard>".
// A namespace may itself contain '/' (model names do); the shard number
// is after the last one.
func Identity(namespace string, shard int) string {
	return namespace + "/" + strconv.Itoa(shard)
}

// ParseIdentity splits an Identity.
func ParseIdentity(id string) (namespace string, shard int, err error) {
	i := strings.LastIndexByte(id, '/')
	if i < 0 {
		return "", 0, fmt.Errorf("shard identity %q: no '/'", id)
	}
	shard, err = strconv.Atoi(id[i+1:])
	if err != nil || shard < 0 {
		return "", 0, fmt.Errorf("shard identity %q: bad shard number", id)
	}
	return id[:i], shard, nil
}
