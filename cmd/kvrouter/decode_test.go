package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

// decodeLines runs `kvrouter decode args` on stdin and parses its output,
// keeping numbers exact.
func decodeLines(t *testing.T, stdin []byte, args ...string) (events []map[string]any, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"decode"}, args...), bytes.NewReader(stdin), &out, &errb)
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("output line is not JSON: %q: %v", sc.Text(), err)
		}
		events = append(events, m)
	}
	return events, errb.String(), code
}

func TestDecodeCommand(t *testing.T) {
	payload := wirefix.New().Batch(1, 2).
		Map(7).Str("type").Str("BlockStored").Str("block_hashes").Array(2).Uint(18446744073709551615, 64).Uint(1<<63, 64).
		Str("parent_block_hash").Uint(18446744073709551557, 64).Str("token_ids").Tokens(1, 2, 3, 4).Str("block_size").Uint(2, 0).
		Str("session_id").Str("sess").Str("lora_name").Str("ad").
		Array(2).Str("BlockRemoved").Array(1).Int(-1, 64).
		Uint(3, 0).Bytes()

	for _, mode := range []struct {
		name  string
		stdin []byte
		args  []string
	}{
		{"raw", payload, nil},
		{"hex with whitespace", []byte(hexLines(payload) + "\n"), []string{"--hex"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			evs, stderr, code := decodeLines(t, mode.stdin, mode.args...)
			if code != 0 || len(evs) != 2 {
				t.Fatalf("code %d, %d events, stderr %q", code, len(evs), stderr)
			}
			s := evs[0]
			checks := map[string]string{
				"type": "BlockStored", "accepted": "true", "reason": "", "dp_rank": "3",
				"block_hashes":      "[18446744073709551615 9223372036854775808]",
				"parent_block_hash": "18446744073709551557",
				"session_id":        "sess", "lora_name": "ad", "cache_salt": "<nil>", "group_idx": "<nil>",
				"kv_cache_spec_kind": "<nil>", "medium": "<nil>",
			}
			for k, want := range checks {
				if got := fmtJSON(s[k]); got != want {
					t.Errorf("%s = %s, want %s", k, got, want)
				}
			}
			if th, ok := s["tokens_hashes"].([]any); !ok || len(th) != 2 {
				t.Errorf("tokens_hashes = %v", s["tokens_hashes"])
			}
			if got := fmtJSON(evs[1]["block_hashes"]); got != "[18446744073709551615]" {
				t.Errorf("signed -1 must print as its u64 bit pattern, got %s", got)
			}
		})
	}
}

func fmtJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case []any:
		parts := make([]string, len(x))
		for i := range x {
			parts[i] = fmtJSON(x[i])
		}
		return "[" + strings.Join(parts, " ") + "]"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case json.Number:
		return x.String()
	case string:
		return x
	}
	return "?"
}

func TestDecodeBlockSizeFlag(t *testing.T) {
	payload := wirefix.New().Batch(1, 1).Array(5).Str("BlockStored").Uints(1).Nil().Tokens(1, 2).Uint(2, 0).Nil().Bytes()
	evs, _, _ := decodeLines(t, payload, "--block-size", "16")
	if len(evs) != 1 || evs[0]["accepted"] != false || evs[0]["reason"] != "block_size_mismatch" {
		t.Fatalf("got %v", evs)
	}
}

func TestDecodeNotABatch(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":      nil,
		"an int":     {0x05},
		"short":      wirefix.New().Array(1).F64(1).Bytes(),
		"bad events": wirefix.New().Array(3).F64(1).Uint(3, 0).Nil().Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			evs, stderr, code := decodeLines(t, in)
			if code != 1 || len(evs) != 0 {
				t.Fatalf("code %d, events %v", code, evs)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "not a kv-event batch") {
				t.Errorf("want a one-line reason, got %q", stderr)
			}
		})
	}
	_, stderr, code := decodeLines(t, []byte("zz"), "--hex")
	if code != 1 || !strings.Contains(stderr, "not hex") {
		t.Errorf("bad hex: code %d %q", code, stderr)
	}
}

func TestDecodeTruncatedReportsLost(t *testing.T) {
	full := wirefix.New().Batch(1, 3).Array(1).Str("AllBlocksCleared").Array(1).Str("AllBlocksCleared").Array(1).Str("AllBlocksCleared").Nil().Bytes()
	evs, stderr, code := decodeLines(t, full[:len(full)-20])
	if code != 0 || len(evs) != 2 || evs[1]["reason"] != "truncated" || !strings.Contains(stderr, "1 further events lost") {
		t.Fatalf("code %d events %v stderr %q", code, evs, stderr)
	}
}

func TestDecodeHelpAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"decode", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "tokens_hashes") || !strings.Contains(out.String(), "-block-size") {
		t.Errorf("decode --help: code %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "decode") {
		t.Errorf("help: code %d", code)
	}
	if code := run([]string{"bogus"}, nil, &out, &errb); code != 2 {
		t.Errorf("unknown command: code %d", code)
	}
	if code := run([]string{"decode", "--engine", "nope"}, nil, &out, &errb); code != 2 {
		t.Errorf("unknown engine: code %d", code)
	}
}

func TestDecodeEverySample(t *testing.T) {
	for _, s := range samples() {
		evs, stderr, code := decodeLines(t, []byte(hex.EncodeToString(s.payload)), "--hex")
		if code != 0 || len(evs) == 0 {
			t.Errorf("sample %s: code %d, %d events, %s", s.name, code, len(evs), stderr)
		}
		byName, _, _ := decodeLines(t, nil, "--sample", s.name)
		if len(byName) != len(evs) {
			t.Errorf("sample %s: --sample gives %d events, stdin %d", s.name, len(byName), len(evs))
		}
	}
}
