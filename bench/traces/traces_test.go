package traces

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmbeddedTracesAreThePublishedFiles checks each embedded trace
// decompresses to the published file (the SHA-256 README.md gives) and
// that every line is a Mooncake record.
func TestEmbeddedTracesAreThePublishedFiles(t *testing.T) {
	want := map[string]struct {
		sha   string
		lines int
	}{
		Conversation: {"b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df", 12031},
		Synthetic:    {"bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131", 3993},
	}
	if len(Names()) != len(want) {
		t.Fatalf("Names() = %v, want %d traces", Names(), len(want))
	}
	for _, name := range Names() {
		r, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want[name].sha {
			t.Errorf("%s: sha256 %s, want %s", name, got, want[name].sha)
		}
		lines := 0
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines++
			var rec struct {
				Timestamp, InputLength, OutputLength *int64
				HashIDs                              []uint64 `json:"hash_ids"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s line %d: %v", name, lines, err)
			}
		}
		if lines != want[name].lines {
			t.Errorf("%s: %d lines, want %d", name, lines, want[name].lines)
		}
	}
}

func TestOpenUnknownNameListsTheTraces(t *testing.T) {
	_, err := Open("chat")
	if err == nil || !strings.Contains(err.Error(), "conversation, synthetic") {
		t.Fatalf("Open(chat) = %v, want an error listing the built-in traces", err)
	}
}

// TestOpenRef reads the same lines through each kind of reference: the
// embedded trace, a plain file and a gzip file.
func TestOpenRef(t *testing.T) {
	const body = `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}` + "\n"
	dir := t.TempDir()
	plain := filepath.Join(dir, "t.jsonl")
	if err := os.WriteFile(plain, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(body))
	zw.Close()
	zipped := filepath.Join(dir, "t.jsonl.gz")
	if err := os.WriteFile(zipped, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{plain, zipped} {
		if got := readRef(t, ref); got != body {
			t.Errorf("OpenRef(%s) read %q, want %q", ref, got, body)
		}
	}
	if got := readRef(t, BuiltinPrefix+Synthetic); !strings.HasPrefix(got, `{"timestamp": 0, "input_length": 40160`) {
		t.Errorf("OpenRef(builtin:synthetic) starts %.60q", got)
	}
	for ref, want := range map[string]string{
		filepath.Join(dir, "missing.jsonl"):    "no such file",
		filepath.Join(dir, "missing.jsonl.gz"): "no such file",
		BuiltinPrefix + "nope":                 "no built-in trace",
	} {
		if _, err := OpenRef(ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenRef(%s) = %v, want an error with %q", ref, err, want)
		}
	}
	if err := os.WriteFile(zipped, []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRef(zipped); err == nil || !strings.Contains(err.Error(), "gunzip") {
		t.Errorf("OpenRef of a corrupt .gz = %v, want a gunzip error", err)
	}
}

func readRef(t *testing.T, ref string) string {
	t.Helper()
	r, err := OpenRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	return string(b)
}

func TestLabel(t *testing.T) {
	for ref, want := range map[string]string{
		"builtin:conversation":                     "conversation",
		"/data/mooncake_conversation_trace.jsonl":  "conversation",
		"traces/mooncake_synthetic_trace.jsonl.gz": "synthetic",
		"/x/other.jsonl":                           "other",
	} {
		if got := Label(ref); got != want {
			t.Errorf("Label(%s) = %q, want %q", ref, got, want)
		}
	}
}
