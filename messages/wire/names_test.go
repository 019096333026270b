package wire

import "testing"

// TestNameTable: every known key is found with its field, every tag with
// its type, every shared value with its spelling, and strings that are
// neither — near misses of known ones included, some in the same slot —
// are not found, so they are skipped (keys) or copied (values) exactly as
// before the table.
func TestNameTable(t *testing.T) {
	for k, f := range keyFields {
		e := names.lookup([]byte(k))
		if e == nil || e.s != k || e.f != f || !e.key {
			t.Errorf("key %q: got %+v, want field %d", k, e, f)
		}
		if got := keyString([]byte(k)); got != k {
			t.Errorf("keyString(%q) = %q", k, got)
		}
	}
	tags := map[string]Type{TagStored: TypeStored, TagRemoved: TypeRemoved, TagCleared: TypeCleared}
	for _, v := range []string{TagStored, TagRemoved, TagCleared, "GPU", "CPU_PINNED", "full_attention", "mamba"} {
		e := names.lookup([]byte(v))
		if e == nil || e.s != v || e.key || e.f != fIgnore || e.typ != tags[v] {
			t.Errorf("value %q: got %+v", v, e)
		}
		if got := keyString([]byte(v)); got != "" {
			t.Errorf("keyString(%q) = %q, want \"\" (a value, not a key)", v, got)
		}
	}
	for _, s := range []string{"", "block_hashe", "block_hashes_", "Block_hashes", "GPUS", "gpu",
		"token_idz", "session-7f3a", "BlockStoredX", "t", "tz", "x",
		// the same first and last 8 bytes as a known string, another middle
		"parent_bXock_hash", "kv_cache_spec_sliding_windoX", "kv_cache_Xpec_sliding_window"} {
		if e := names.lookup([]byte(s)); e != nil {
			t.Errorf("%q found as %+v", s, e)
		}
		if f := keyField([]byte(s)); f != fIgnore {
			t.Errorf("keyField(%q) = %d", s, f)
		}
		if got := intern([]byte(s)); got != s {
			t.Errorf("intern(%q) = %q", s, got)
		}
	}
}

// TestInternSharesKnownValues: a known value comes back as the shared
// string, without allocating.
func TestInternSharesKnownValues(t *testing.T) {
	b := []byte("full_attention")
	if n := testing.AllocsPerRun(100, func() { _ = intern(b) }); n != 0 {
		t.Errorf("intern of a known value: %.0f allocations", n)
	}
}
