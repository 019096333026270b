package httpapi

import (
	"encoding/json"
	"unicode/utf8"
)

// The fast path for the hot bodies (/route, /query, /query_by_hash).
//
// encoding/json scans a body twice (once to find the value's end, once to
// decode it) and calls token_ids' decoder through reflection: ~90 µs for a
// 1024-token /route on this machine, most of the HTTP layer's budget. Most
// real bodies are plain — known keys, once each, unescaped strings,
// integer arrays — and fastDecode reads those in one pass. It is strict:
// the moment the body is anything else (an escape, an unknown or repeated
// key, a key in other case, a bad number, a syntax error) it gives up and
// the encoding/json path decodes it from scratch, so that path alone
// decides every error and every unusual case. What fastDecode accepts,
// encoding/json accepts identically (FuzzFastDecode checks it).

// fastBody is a body struct the fast path can fill: fastTarget returns the
// address of the field a key names (*[]…List, **string, **bool), or nil.
type fastBody interface {
	fastTarget(key []byte) any
}

func (b *routeBody) fastTarget(key []byte) any {
	switch string(key) {
	case "token_ids":
		return &b.TokenIDs
	case "block_hashes":
		return &b.BlockHashes
	case "session_id":
		return &b.SessionID
	case "request_id":
		return &b.RequestID
	case "include_scores":
		return &b.IncludeScores
	}
	return namespaceTarget(key, &b.ModelName, &b.TenantID, &b.LoraName, &b.CacheSalt)
}

func (b *queryBody) fastTarget(key []byte) any {
	if string(key) == "token_ids" {
		return &b.TokenIDs
	}
	return namespaceTarget(key, &b.ModelName, &b.TenantID, &b.LoraName, &b.CacheSalt)
}

func (b *queryByHashBody) fastTarget(key []byte) any {
	if string(key) == "block_hashes" {
		return &b.BlockHashes
	}
	return namespaceTarget(key, &b.ModelName, &b.TenantID, nil, nil)
}

// namespaceTarget is fastTarget for the namespace keys the bodies share:
// model_name, tenant_id, and lora_name and cache_salt where the body has
// them (lora and salt not nil).
func namespaceTarget(key []byte, model, tenant, lora, salt **string) any {
	var t **string
	switch string(key) {
	case "model_name":
		t = model
	case "tenant_id":
		t = tenant
	case "lora_name":
		t = lora
	case "cache_salt":
		t = salt
	}
	if t == nil {
		return nil // not a nil **string: fastDecode tests the interface
	}
	return t
}

// fastDecode fills dst from b and reports true, or reports false (dst
// possibly half filled) when b needs the general decoder.
func fastDecode(b []byte, dst fastBody) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	var seen [8]any // targets already set: a repeated key falls back
	nseen := 0
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := fastString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		t := dst.fastTarget(key)
		if t == nil || nseen == len(seen) {
			return false
		}
		for _, s := range seen[:nseen] {
			if s == t {
				return false
			}
		}
		seen[nseen] = t
		nseen++
		if i, ok = fastValue(b, i, t); !ok {
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// fastString reads the string at b[i] when it has no escapes, no control
// characters and valid UTF-8; it returns its content and the index after
// the closing quote.
func fastString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			return s, j + 1, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// fastValue reads the value at b[i] into t and returns the index after it.
func fastValue(b []byte, i int, t any) (int, bool) {
	if hasLiteral(b, i, "null") {
		return i + 4, true // fields start nil, and a key comes only once
	}
	switch p := t.(type) {
	case **string:
		s, j, ok := fastString(b, i)
		if !ok {
			return 0, false
		}
		str := string(s)
		*p = &str
		return j, true
	case **bool:
		switch {
		case hasLiteral(b, i, "true"):
			v := true
			*p = &v
			return i + 4, true
		case hasLiteral(b, i, "false"):
			v := false
			*p = &v
			return i + 5, true
		}
		return 0, false
	case json.Unmarshaler: // *tokenList, *hashList
		end, ok := arrayEnd(b, i)
		if !ok || p.UnmarshalJSON(b[i:end]) != nil {
			return 0, false
		}
		return end, true
	}
	return 0, false
}

// arrayEnd returns the index after the first ']' from b[i] == '['. For an
// array of numbers that is its end; anything else fails to parse as one
// and falls back.
func arrayEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '[' {
		return 0, false
	}
	for j := i + 1; j < len(b); j++ {
		if b[j] == ']' {
			return j + 1, true
		}
	}
	return 0, false
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}
