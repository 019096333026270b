package httpapi

// Hand-written JSON, in one place: the three paths where this package
// reads or writes JSON without encoding/json, and why each does.
//
//   - Integer arrays (token_ids, block_hashes: tokenList, hashList). Their
//     parser rejects a non-integer element that encoding/json would accept
//     silently ([1,null] decodes as [1,0]), with the element's reason, and
//     it skips reflection per element.
//   - The fast path (fastDecode) for the hot bodies (/route, /query,
//     /query_by_hash): one pass over a plain body instead of encoding/json's
//     two (scan for the value's end, then decode). It gives up on anything
//     unusual, and encoding/json then decides; FuzzFastDecode checks that
//     they agree.
//   - The dump writer's events (appendRouterEvent, appendJSONString): the
//     exact serde_json shape of Dynamo's RouterEvent ("cleared" as a bare
//     string, session_id only when set), appended into the writer's buffer
//     without an allocation per event, so that a dump of millions of
//     events costs no garbage.
//
// Measured by BenchmarkRouteBody and BenchmarkDumpEvent (handjson_test.go;
// best of 3 runs of 3,000 iterations, 2 shared cores of an AMD EPYC under
// other jobs' load, so the ratios matter, not the times): a 1,024-token
// /route body takes 58 µs by the fast path, 299 µs by encoding/json with
// the integer-array parser, 452 µs by encoding/json alone; one 16-block
// stored event is written in 0.27 µs with no allocation by
// appendRouterEvent, 3.8 µs and 9 allocations by encoding/json.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/routerevent"
)

// tokenList is token_ids: a JSON array of integers in [0, 2^32-1], parsed
// by hand: every non-integer element is rejected with the reason of
// TestBadInputs. JSON null for the whole list leaves it nil (absent).
type tokenList []uint32

var tokenIDs = intArray{field: "token_ids", want: "an unsigned 32-bit integer", max: 1<<32 - 1, minBytes: 4}

// UnmarshalJSON implements json.Unmarshaler.
func (t *tokenList) UnmarshalJSON(b []byte) error { return unmarshalInts(t, b, &tokenIDs) }

// hashList is block_hashes: integers in [-2^63, 2^64-1], kept as their
// 64-bit two's-complement pattern. The reference indexer types the field
// i64, kvrouter's hashes are u64, so both spellings of a hash are accepted
// and mean the same bits.
type hashList []messages.LocalHash

var blockHashes = intArray{field: "block_hashes", want: "a 64-bit integer", allowNeg: true, max: 1<<64 - 1, minBytes: 8}

// UnmarshalJSON implements json.Unmarshaler.
func (h *hashList) UnmarshalJSON(b []byte) error { return unmarshalInts(h, b, &blockHashes) }

// intArray describes a field that is a JSON array of integers.
type intArray struct {
	field    string // its JSON name
	want     string // one element's type, for errors
	allowNeg bool   // negatives down to -2^63 are admitted (as two's complement)
	max      uint64 // the bound of non-negative values
	minBytes int    // the bytes of a typical element, to size the list
}

// unmarshalInts parses b as the integer array a into *dst; JSON null
// leaves *dst nil.
func unmarshalInts[L ~[]E, E ~uint32 | ~uint64](dst *L, b []byte, a *intArray) error {
	if string(b) == "null" {
		*dst = nil
		return nil
	}
	out := make(L, 0, len(b)/a.minBytes+1)
	if err := a.parse(b, func(v uint64) { out = append(out, E(v)) }); err != nil {
		return err
	}
	*dst = out
	return nil
}

// parse parses b, one JSON value already checked by encoding/json's
// scanner, as the array a and calls emit for each element.
func (a *intArray) parse(b []byte, emit func(uint64)) *apiError {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return badRequest(api.ReasonWrongType, "%s: want an array, got %s", a.field, jsonKind(b[i:]))
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		if i >= len(b) {
			return badRequest(api.ReasonBadJSON, "%s: truncated array", a.field)
		}
		if c := b[i]; c != '-' && (c < '0' || c > '9') {
			return wantGot(api.ReasonWrongType, a.field, a.want, jsonKind(b[i:]))
		}
		start := i
		for i < len(b) && isNumberByte(b[i]) {
			i++
		}
		v, e := a.element(b[start:i])
		if e != nil {
			return e
		}
		emit(v)
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ']' {
			return nil
		}
		if i >= len(b) || b[i] != ',' {
			return badRequest(api.ReasonBadJSON, "%s: malformed array", a.field)
		}
		i = skipSpace(b, i+1)
	}
}

// element parses one JSON number literal of the array a as an integer.
func (a *intArray) element(lit []byte) (uint64, *apiError) {
	neg := len(lit) > 0 && lit[0] == '-'
	digits := lit
	if neg {
		digits = lit[1:]
	}
	var v uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, wantGot(api.ReasonNotAnInteger, a.field, a.want, clip(string(lit)))
		}
		v = v*10 + uint64(c-'0') // wraps past 19 digits: checked below
	}
	// Not JSON numbers; encoding/json's scanner never lets these through,
	// the fast path (fastDecode) falls back on them.
	if len(digits) == 0 || (len(digits) > 1 && digits[0] == '0') {
		return 0, badRequest(api.ReasonBadJSON, "%s: %s is not a JSON number", a.field, clip(string(lit)))
	}
	reason := ""
	switch {
	case neg && !a.allowNeg:
		reason = api.ReasonNegativeNumber
	// Up to 19 digits cannot wrap; 20 fit when not above 2^64-1 (same
	// length, so byte order is numeric order).
	case len(digits) > 20 || (len(digits) == 20 && string(digits) > "18446744073709551615"):
		reason = api.ReasonOutOfRange
	case neg && v > 1<<63:
		reason = api.ReasonOutOfRange
	case neg:
		return -v, nil // two's complement
	case v > a.max:
		reason = api.ReasonOutOfRange
	}
	if reason != "" {
		return 0, wantGot(reason, a.field, a.want, clip(string(lit)))
	}
	return v, nil
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonKind names the JSON type of the value starting b, as
// UnmarshalTypeError does.
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// The fast path for the hot bodies (/route, /query, /query_by_hash). Most
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
	switch string(key) {
	case "token_ids":
		return &b.TokenIDs
	case "include_instances":
		return &b.IncludeInstances
	}
	return namespaceTarget(key, &b.ModelName, &b.TenantID, &b.LoraName, &b.CacheSalt)
}

func (b *queryByHashBody) fastTarget(key []byte) any {
	switch string(key) {
	case "block_hashes":
		return &b.BlockHashes
	case "include_instances":
		return &b.IncludeInstances
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

// appendRouterEvent appends ev as Dynamo's serde_json RouterEvent.
func appendRouterEvent(b []byte, ev messages.RouterEvent) ([]byte, error) {
	tier := routerevent.TierName(ev.StorageTier)
	if tier == "" {
		return b, fmt.Errorf("event of worker %d: unknown storage tier %d", ev.WorkerID, ev.StorageTier)
	}
	b = append(b, `{"worker_id":`...)
	b = strconv.AppendUint(b, uint64(ev.WorkerID), 10)
	b = append(b, `,"storage_tier":"`...)
	b = append(b, tier...)
	b = append(b, `","event":{"event_id":`...)
	b = strconv.AppendUint(b, ev.Event.EventID, 10)
	b = append(b, `,"data":`...)
	switch ev.Event.Kind {
	case messages.KindStored:
		b = append(b, `{"stored":{"parent_hash":`...)
		if ev.Event.HasParent {
			b = strconv.AppendUint(b, uint64(ev.Event.ParentHash), 10)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"blocks":[`...)
		for i, blk := range ev.Event.Blocks {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"block_hash":`...)
			b = strconv.AppendUint(b, uint64(blk.BlockHash), 10)
			b = append(b, `,"tokens_hash":`...)
			b = strconv.AppendUint(b, uint64(blk.TokensHash), 10)
			b = append(b, '}')
		}
		b = append(b, "]}}"...)
	case messages.KindRemoved:
		b = append(b, `{"removed":{"block_hashes":[`...)
		for i, h := range ev.Event.Removed {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(h), 10)
		}
		b = append(b, "]}}"...)
	case messages.KindCleared:
		b = append(b, `"cleared"`...)
	default:
		return b, fmt.Errorf("event %d of worker %d: unknown kind %d", ev.Event.EventID, ev.WorkerID, ev.Event.Kind)
	}
	b = append(b, `,"dp_rank":`...)
	b = strconv.AppendUint(b, uint64(ev.Event.DpRank), 10)
	b = append(b, '}')
	if ev.SessionID != "" {
		b = append(b, `,"session_id":`...)
		b = appendJSONString(b, ev.SessionID)
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
