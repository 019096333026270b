package usage

import (
	"strings"
	"testing"
)

func TestCachedTokens(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want uint64
		ok   bool
	}{
		{"vLLM JSON answer", `{"id":"cmpl-1","choices":[{"text":"hi"}],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}`, 32, true},
		{"stream usage chunk", "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"prompt_tokens_details\":{\"cached_tokens\": 16}}}\n\ndata: [DONE]\n\n", 16, true},
		{"the last one wins", `{"cached_tokens":1} {"cached_tokens":7}`, 7, true},
		{"spaces around the colon", "{\"cached_tokens\" :\n 5}", 5, true},
		{"zero is an answer", `{"prompt_tokens_details":{"cached_tokens":0}}`, 0, true},
		{"no usage", `{"choices":[{"text":"x"}]}`, 0, false},
		{"null details", `{"usage":{"prompt_tokens_details":null}}`, 0, false},
		{"null value", `{"cached_tokens":null}`, 0, false},
		{"a string", `{"cached_tokens":"12"}`, 0, false},
		{"negative", `{"cached_tokens":-3}`, 0, false},
		{"cut mid-number", `{"cached_tokens":12`, 0, false},
		{"escaped key in generated text is not the key", `{"text":"say \"cached_tokens\": 99,"}`, 0, false},
		{"bad last, good earlier", `{"cached_tokens":4} {"cached_tokens":x}`, 4, true},
		{"past 2^53", `{"cached_tokens":90071992547409930}`, 0, false},
	} {
		got, ok := CachedTokens([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: CachedTokens = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	final := `data: {"usage":{"prompt_tokens_details":{"cached_tokens":48}}}` + "\n\ndata: [DONE]\n\n"
	long := strings.Repeat(`data: {"choices":[{"text":"token"}]}`+"\n\n", 500) + final
	for _, chunk := range []int{1, 7, 100, TailBytes - 1, TailBytes, TailBytes + 1, len(long)} {
		var tl Tail
		for s := long; len(s) > 0; {
			n := min(chunk, len(s))
			if w, err := tl.Write([]byte(s[:n])); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			s = s[n:]
		}
		got := string(tl.Bytes())
		if len(got) != TailBytes || got != long[len(long)-TailBytes:] {
			t.Fatalf("chunks of %d: kept %d bytes, not the answer's last %d", chunk, len(got), TailBytes)
		}
		if n, ok := CachedTokens(tl.Bytes()); !ok || n != 48 {
			t.Errorf("chunks of %d: cached %d, %v; want 48", chunk, n, ok)
		}
	}
	var short Tail
	short.Write([]byte("abc"))
	short.Write([]byte("de"))
	if string(short.Bytes()) != "abcde" {
		t.Errorf("short tail %q", short.Bytes())
	}
}

func FuzzCachedTokens(f *testing.F) {
	f.Add([]byte(`{"cached_tokens":12}`))
	f.Add([]byte(`"cached_tokens": :`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tl Tail
		tl.Write(b)
		n, ok := CachedTokens(tl.Bytes())
		if ok && n > 1<<53 {
			t.Fatalf("count %d past 2^53", n)
		}
	})
}
