package tokenizer

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestJSONScanMatchesEncodingJSON: the vocabulary and merge readers give
// what encoding/json gives, on escapes (control characters, quotes,
// surrogate pairs) and on random strings written by encoding/json.
func TestJSONScanMatchesEncodingJSON(t *testing.T) {
	vocab := `{"a\u0120b": 1, "\ud83d\ude00":2,"x\"y\\z\/" : 3,"\n\t\r\b\f":4, "é":5}`
	got, err := parseVocab([]byte(vocab))
	var want map[string]uint32
	if json.Unmarshal([]byte(vocab), &want) != nil || err != nil || !maps.Equal(got, want) {
		t.Fatalf("vocab: %v %v, want %v", got, err, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []rune("ab \"\\/\n\x01é中😀\u2028")
	for range 200 {
		m := map[string]uint32{}
		pairs := [][2]string{}
		for i := range rng.IntN(20) {
			var b strings.Builder
			for range 1 + rng.IntN(6) {
				b.WriteRune(alphabet[rng.IntN(len(alphabet))])
			}
			m[b.String()] = uint32(i)
			pairs = append(pairs, [2]string{b.String(), "x"})
		}
		raw, _ := json.Marshal(m)
		if got, err := parseVocab(raw); err != nil || !maps.Equal(got, m) {
			t.Fatalf("vocab %s: %v %v", raw, got, err)
		}
		raw, _ = json.Marshal(pairs)
		if got, err := parseMergeList(raw); err != nil || !slices.Equal(got, pairs) {
			t.Fatalf("merges %s: %v %v", raw, got, err)
		}
	}
	if got, err := parseMergeList([]byte(`["a b", "Ġ Ġt"]`)); err != nil || !slices.Equal(got, [][2]string{{"a", "b"}, {"Ġ", "Ġt"}}) {
		t.Fatalf("string merges: %v %v", got, err)
	}
	for _, bad := range []string{`["a"]`, `[["a"]]`, `[["a","b","c"]]`, `["a b c"]`, `[1]`} {
		if _, err := parseMergeList([]byte(bad)); err == nil {
			t.Errorf("merges %s accepted", bad)
		}
	}
	for _, bad := range []string{`{"a":-1}`, `{"a":"1"}`, `{"a":4294967296}`, `["a"]`} {
		if _, err := parseVocab([]byte(bad)); err == nil {
			t.Errorf("vocab %s accepted", bad)
		}
	}
}
