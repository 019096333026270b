package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens/enginefake"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
	"github.com/kvrouter/kvrouter/messages/tokenizer/tokenizertest"
)

func tokenizeCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	code = run(append([]string{"tokenize"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func idsOf(t *testing.T, out string) []uint32 {
	t.Helper()
	var ids []uint32
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		t.Fatalf("stdout %q: %v", out, err)
	}
	return ids
}

// TestTokenizeGolden: the command is the tokenizer's black box; it gives
// the golden ids (from the JavaScript reference) for the corpus.
func TestTokenizeGolden(t *testing.T) {
	data, err := os.ReadFile("../../messages/tokenizer/testdata/qwen3.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Text string   `json:"text"`
			IDs  []uint32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	// A few of the hard ones (each run loads the file; the whole corpus is
	// the tokenizer package's golden test).
	picked := 0
	for _, c := range g.Cases {
		if !strings.Contains(c.Text, "日本語") && !strings.Contains(c.Text, "Emoji") && !strings.Contains(c.Text, "<|im_start|>") {
			continue
		}
		picked++
		code, out, errs := tokenizeCmd(t, c.Text, "--tokenizer", qwen3Fixture)
		if code != 0 || !slices.Equal(idsOf(t, out), c.IDs) {
			t.Fatalf("%q: code %d, out %s, err %s, want %v", c.Text, code, out, errs, c.IDs)
		}
	}
	if picked != 3 {
		t.Fatalf("picked %d golden cases, want 3", picked)
	}
}

func TestTokenizeThroughEngine(t *testing.T) {
	tk, err := tokenizer.Load(qwen3Fixture)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&enginefake.Engine{Tokenizer: tk})
	defer srv.Close()
	msgs := `[{"role":"user","content":"Hi"}]`
	code, out, errs := tokenizeCmd(t, msgs, "--chat", "--engine-url", srv.URL, "--model", "qwen3", "--chat-template-kwargs", `{"enable_thinking":false}`)
	want, _ := tk.Encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", false)
	if code != 0 || !slices.Equal(idsOf(t, out), want) {
		t.Fatalf("chat: code %d out %s err %s, want %v", code, out, errs, want)
	}
	if code, out, _ := tokenizeCmd(t, "Hello world", "--tokenizer", qwen3Fixture, "--engine-url", srv.URL); code != 0 || !slices.Equal(idsOf(t, out), []uint32{9707, 1879}) {
		t.Fatalf("local and engine: code %d out %s", code, out)
	}
	bytesOnly := t.TempDir() + "/bytes.json"
	if err := os.WriteFile(bytesOnly, tokenizertest.File{}.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = tokenizeCmd(t, "Hello world", "--tokenizer", bytesOnly, "--engine-url", srv.URL)
	if code != 1 || !strings.Contains(errs, "disagree") {
		t.Fatalf("a disagreement: code %d err %s", code, errs)
	}
}

func TestTokenizeRefusals(t *testing.T) {
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"[]", []string{"--chat", "--tokenizer", qwen3Fixture}, "--chat needs --engine-url"},
		{"\xff\xfe", []string{"--tokenizer", qwen3Fixture}, "not valid UTF-8"},
		{"x", nil, "need --tokenizer"},
		{"x", []string{"--tokenizer", "no-such-file.json"}, "no-such-file.json"},
	} {
		if code, _, errs := tokenizeCmd(t, c.stdin, c.args...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: code %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}
