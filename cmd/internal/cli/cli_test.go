package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestFloatList(t *testing.T) {
	got, err := FloatList("--x", "0.5, 1,,2")
	if err != nil || !slices.Equal(got, []float64{0.5, 1, 2}) {
		t.Errorf("FloatList = %v, %v", got, err)
	}
	if _, err := FloatList("--x", "1,heavy"); err == nil || !strings.Contains(err.Error(), `--x: "heavy" is not a number`) {
		t.Errorf("FloatList of a word: err %v", err)
	}
}

func TestIntList(t *testing.T) {
	got, err := IntList(" 4, 16,,64 ")
	if err != nil || !slices.Equal(got, []int{4, 16, 64}) {
		t.Errorf("IntList = %v, %v", got, err)
	}
	if _, err := IntList("4,x"); err == nil || !strings.Contains(err.Error(), `"x" is not an integer`) {
		t.Errorf("IntList of a word: err %v", err)
	}
}

// --help prints the usage once on stdout; a stray argument is refused
// under the command's name.
func TestParseFlags(t *testing.T) {
	var out, errb bytes.Buffer
	fs := NewFlags("kvrouter-x", "Usage: kvrouter-x\n", &errb)
	fs.Bool("loud", false, "be loud")
	if code, done := ParseFlags(fs, []string{"--help"}, &out, &errb); code != 0 || !done {
		t.Fatalf("--help: code %d done %v", code, done)
	}
	if strings.Count(out.String(), "Usage: kvrouter-x") != 1 || !strings.Contains(out.String(), "-loud") || errb.Len() != 0 {
		t.Errorf("--help: stdout %q, stderr %q", out.String(), errb.String())
	}
	out.Reset()
	fs = NewFlags("kvrouter-x", "Usage: kvrouter-x\n", &errb)
	if code, done := ParseFlags(fs, []string{"extra"}, &out, &errb); code != 2 || !done ||
		!strings.Contains(errb.String(), `kvrouter-x: unexpected argument "extra"`) {
		t.Errorf("stray argument: code %d done %v stderr %q", code, done, errb.String())
	}
}
