package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// alphabet mixes every class the patterns tell apart: letters (ASCII,
// accented, CJK, long s), digits (ASCII and others), spaces (ASCII, CR,
// LF, tab, NBSP, ideographic), marks, punctuation, emoji, apostrophes.
var alphabet = []rune("aZsStTrReEvVmMlLdDſé中ß0９٣½ \t\r\n\u00a0\u3000\u2028\u0301\u093f'’!.,-_/<>|😀\u200d\ufeff\x00")

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func checkScanner(t *testing.T, s string) {
	t.Helper()
	for _, c := range []struct {
		pattern string
		sc      scanner
	}{{cl100kPattern, scanner{maxDigits: 3}}, {qwenPattern, scanner{maxDigits: 1}}} {
		re, err := compileRegex(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		var sc splitScratch
		want, err := re.appendEnds(nil, s, &sc)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := c.sc.appendEnds(nil, s, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("digits %d, %q:\n scanner %v\n regexp2 %v", c.sc.maxDigits, s, got, want)
		}
	}
}

// TestScannerMatchesRegex: the hand-written scanner cuts text exactly where
// regexp2 running the same pattern does — on the golden corpus and on
// random strings over the classes the pattern distinguishes.
func TestScannerMatchesRegex(t *testing.T) {
	data, err := os.ReadFile("testdata/gen/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	for _, s := range corpus {
		checkScanner(t, s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		checkScanner(t, randomText(rng, 1+rng.IntN(24)))
	}
}

func FuzzScannerMatchesRegex(f *testing.F) {
	for _, s := range []string{"Hello world", "  \n\n x", "'S'll 123456", "a\u00a0\u00a0b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !strings.ContainsRune(s, '\uFFFD') && strings.ToValidUTF8(s, "") == s {
			checkScanner(t, s)
		}
	})
}
