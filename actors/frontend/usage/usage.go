// Package usage reads what an engine says it served from cache, from the
// answer the request path relays: the OpenAI-compatible usage object's
// prompt_tokens_details.cached_tokens, which vLLM and SGLang fill when
// their prefix cache served part of the prompt (vLLM returns it in the
// final JSON answer, and in a stream's usage chunk when the client asked
// for stream_options.include_usage; SGLang likewise).
//
// The proxy and the endpoint picker relay answers of any length chunk by
// chunk and must not hold them: a Tail keeps only the last TailBytes of
// the answer (usage comes last: in the final chunk of a stream, after
// choices in a JSON answer as the engines write it), and CachedTokens
// reads the last cached_tokens in it. It scans bytes for the key instead
// of decoding the JSON, because the tail may start mid-document; a key
// inside a generated string would be escaped (\"cached_tokens\") and so
// never matches the unescaped key. An answer without the field says
// nothing (ok false): engines and requests that do not report usage are
// not counted as misses.
package usage

import "bytes"

// TailBytes is how much of an answer's end a Tail keeps: the final
// chunk of a stream with usage is a few hundred bytes; a JSON answer's
// usage object, under one.
const TailBytes = 2048

// Tail keeps the last TailBytes written to it, in a fixed buffer.
type Tail struct {
	buf  [TailBytes]byte
	n    int  // bytes held
	full bool // more than TailBytes were written: buf is a ring at n
}

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	w := len(p)
	if len(p) >= TailBytes {
		copy(t.buf[:], p[len(p)-TailBytes:])
		t.n, t.full = 0, true
		return w, nil
	}
	for len(p) > 0 {
		c := copy(t.buf[t.n:], p)
		p = p[c:]
		t.n += c
		if t.n == TailBytes {
			t.n, t.full = 0, true
		}
	}
	return w, nil
}

// Bytes is the kept tail in order (a copy when the ring wrapped).
func (t *Tail) Bytes() []byte {
	if !t.full {
		return t.buf[:t.n]
	}
	out := make([]byte, 0, TailBytes)
	out = append(out, t.buf[t.n:]...)
	return append(out, t.buf[:t.n]...)
}

// CachedTokens is the last cached_tokens value in b (ok false when b has
// none, or its value is not a non-negative integer).
func CachedTokens(b []byte) (n uint64, ok bool) {
	key := []byte(`"cached_tokens"`)
	for end := len(b); end > 0; {
		i := bytes.LastIndex(b[:end], key)
		if i < 0 {
			return 0, false
		}
		if v, ok := number(b[i+len(key):]); ok {
			return v, true
		}
		end = i
	}
	return 0, false
}

// number reads `: 123` (spaces allowed around the colon) at the start of
// b; a null, a string or a value past 2^53 is not a count.
func number(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	if i == len(b) || b[i] != ':' {
		return 0, false
	}
	i++
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	start := i
	var v uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		v = v*10 + uint64(b[i]-'0')
		if v > 1<<53 {
			return 0, false
		}
		i++
	}
	if i == start || i == len(b) { // no digits, or cut mid-number
		return 0, false
	}
	switch b[i] {
	case ',', '}', ' ', '\t', '\n', '\r':
		return v, true
	}
	return 0, false
}
