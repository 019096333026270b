package clusterindex

import "testing"

func TestIdentityRoundTrip(t *testing.T) {
	for _, ns := range []string{"m", "org/model", "a/b/c", ""} {
		for _, shard := range []int{0, 7, 1234} {
			gotNS, gotShard, err := ParseIdentity(Identity(ns, shard))
			if err != nil || gotNS != ns || gotShard != shard {
				t.Fatalf("%q/%d: %q %d %v", ns, shard, gotNS, gotShard, err)
			}
		}
	}
	for _, bad := range []string{"noslash", "m/", "m/x", "m/-1"} {
		if _, _, err := ParseIdentity(bad); err == nil {
			t.Errorf("ParseIdentity(%q): no error", bad)
		}
	}
}
