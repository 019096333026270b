package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// statusClientClosed is nginx's "client closed request": logged and counted
// only, as nobody reads it.
const statusClientClosed = 499

// maxStringBytes caps every string field (names, endpoints, salts, ids), as
// messages/wire caps the strings it keeps.
const maxStringBytes = 4096

// maxRequestIDBytes caps request ids: they travel in URL paths.
const maxRequestIDBytes = 128

// apiError is an error response: the status, the reason label and the
// message shown to the client.
type apiError struct {
	status int
	reason string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(reason, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// decodeBody reads r's JSON object body into dst (a pointer to a body
// struct). strict rejects unknown fields. Every failure is a 4xx.
//
// The body is read whole (at most maxBytes) and then decoded: by the fast
// path of fastjson.go when dst has one and the body is plain, otherwise by
// encoding/json, which also gives every error its reason.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any, strict bool, maxBytes int64) *apiError {
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return &apiError{status: http.StatusUnsupportedMediaType, reason: api.ReasonUnsupportedMedia,
			msg: fmt.Sprintf("Content-Type must be application/json, got %q", clip(ct))}
	}
	if r.ContentLength > maxBytes {
		return tooLarge(maxBytes)
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuffer(buf)
	buf.Reset()
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBytes)); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return tooLarge(maxBytes)
		}
		return badRequest(api.ReasonBadJSON, "could not read the request body")
	}
	body := buf.Bytes()
	if fb, ok := dst.(fastBody); ok {
		if fastDecode(body, fb) {
			return nil
		}
		reflect.ValueOf(dst).Elem().SetZero() // drop what the fast path set
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		return classifyDecode(err, maxBytes)
	}
	// Exactly one value: anything but whitespace after it is an error.
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(api.ReasonBadJSON, "unexpected data after the JSON object")
	}
	return nil
}

// isJSON accepts application/json and any application/*+json, with
// parameters. Requiring it also keeps browsers from posting to the API
// cross-site without a CORS preflight (which the server never grants).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func tooLarge(maxBytes int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, reason: api.ReasonBodyTooLarge,
		msg: fmt.Sprintf("request body exceeds %d bytes", maxBytes)}
}

// classifyDecode turns an encoding/json (or body reader) error into a 4xx.
func classifyDecode(err error, maxBytes int64) *apiError {
	var (
		mb  *http.MaxBytesError
		syn *json.SyntaxError
		ute *json.UnmarshalTypeError
		ae  *apiError
	)
	switch {
	case errors.As(err, &mb):
		return tooLarge(maxBytes)
	case errors.As(err, &ae): // from a field's UnmarshalJSON
		return ae
	case errors.Is(err, io.EOF):
		return badRequest(api.ReasonBadJSON, "empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest(api.ReasonBadJSON, "truncated JSON")
	case errors.As(err, &syn):
		return badRequest(api.ReasonBadJSON, "invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &ute):
		return classifyType(ute)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest(api.ReasonUnknownField, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return badRequest(api.ReasonBadJSON, "invalid JSON: %s", clip(err.Error()))
}

func classifyType(e *json.UnmarshalTypeError) *apiError {
	if e.Field == "" {
		return badRequest(api.ReasonBadJSON, "body must be a JSON object, got %s", e.Value)
	}
	want := describe(e.Type)
	t := e.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if lit, ok := strings.CutPrefix(e.Value, "number "); ok && (t.Kind() == reflect.Uint32 || t.Kind() == reflect.Uint64) {
		return numberError(e.Field, want, lit)
	}
	return wantGot(api.ReasonWrongType, e.Field, want, e.Value)
}

// numberError explains why the number literal lit does not fit a field of
// unsigned integer type want.
func numberError(field, want, lit string) *apiError {
	reason := api.ReasonOutOfRange
	switch {
	case strings.HasPrefix(lit, "-") && !strings.ContainsAny(lit, ".eE"):
		reason = api.ReasonNegativeNumber
	case strings.ContainsAny(lit, ".eE"):
		reason = api.ReasonNotAnInteger
	}
	return wantGot(reason, field, want, clip(lit))
}

// wantGot is the 400 of a field whose value got is not of type want.
func wantGot(reason, field, want, got string) *apiError {
	return badRequest(reason, "%s: want %s, got %s", field, want, got)
}

// describe names a Go field type the way a JSON client thinks of it.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return describe(t.Elem())
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(describe(t.Elem()), "an "), "a ") + "s"
	case reflect.Uint32:
		return "an unsigned 32-bit integer"
	case reflect.Uint64:
		return "an unsigned 64-bit integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// tokenList is token_ids: a JSON array of integers in [0, 2^32-1], parsed
// by hand. encoding/json would decode a null element as 0 (silently
// accepting [1,null]) and costs a reflective call per element; this parser
// rejects every non-integer element with the reason of TestBadInputs and
// runs in one pass. JSON null for the whole list leaves it nil (absent).
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
	// the fast path (fastjson.go) falls back on them.
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

// clip shortens a client-supplied string for an error message.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// Request bodies as they arrive: pointers tell absent (or null) from zero.

type registerBody struct {
	InstanceID      *uint64 `json:"instance_id"`
	Endpoint        *string `json:"endpoint"`
	ModelName       *string `json:"model_name"`
	TenantID        *string `json:"tenant_id"`
	BlockSize       *uint32 `json:"block_size"`
	DpRank          *uint32 `json:"dp_rank"`
	LoraName        *string `json:"lora_name"`
	ReplayEndpoint  *string `json:"replay_endpoint"`
	ServingEndpoint *string `json:"serving_endpoint"`
}

type unregisterBody struct {
	InstanceID *uint64 `json:"instance_id"`
	ModelName  *string `json:"model_name"`
	TenantID   *string `json:"tenant_id"`
	DpRank     *uint32 `json:"dp_rank"`
}

type queryBody struct {
	TokenIDs  tokenList `json:"token_ids"`
	ModelName *string   `json:"model_name"`
	TenantID  *string   `json:"tenant_id"`
	LoraName  *string   `json:"lora_name"`
	CacheSalt *string   `json:"cache_salt"`
}

type queryByHashBody struct {
	BlockHashes hashList `json:"block_hashes"`
	ModelName   *string  `json:"model_name"`
	TenantID    *string  `json:"tenant_id"`
}

type routeBody struct {
	TokenIDs      tokenList `json:"token_ids"`
	BlockHashes   hashList  `json:"block_hashes"`
	ModelName     *string   `json:"model_name"`
	TenantID      *string   `json:"tenant_id"`
	LoraName      *string   `json:"lora_name"`
	CacheSalt     *string   `json:"cache_salt"`
	SessionID     *string   `json:"session_id"`
	RequestID     *string   `json:"request_id"`
	IncludeScores *bool     `json:"include_scores"`
}

// limits are the list caps of one server.
type limits struct {
	maxTokens int
	maxHashes int
}

func (l limits) tokens(n int) *apiError {
	return tooMany(api.ReasonTooManyTokens, "token_ids", "tokens", n, l.maxTokens)
}

func (l limits) hashes(n int) *apiError {
	return tooMany(api.ReasonTooManyHashes, "block_hashes", "hashes", n, l.maxHashes)
}

// tooMany is the 413 of a list of n items when more than max are.
func tooMany(reason, field, items string, n, max int) *apiError {
	if n > max {
		return &apiError{status: http.StatusRequestEntityTooLarge, reason: reason,
			msg: fmt.Sprintf("%s: %d %s, at most %d allowed", field, n, items, max)}
	}
	return nil
}

// fields validates the string fields of one body, keeping the first error.
type fields struct{ err *apiError }

// name returns a required name: present, non-empty, no control characters.
func (f *fields) name(field string, p *string) string {
	if f.err != nil {
		return ""
	}
	if p == nil || *p == "" {
		f.err = badRequest(api.ReasonMissingField, "%s is required", field)
		return ""
	}
	return f.check(field, *p, true)
}

// optName returns an optional name ("" when absent: "" counts as absent).
func (f *fields) optName(field string, p *string) string {
	if f.err != nil || p == nil {
		return ""
	}
	return f.check(field, *p, true)
}

// optText is optName for free text (salts, session ids): control
// characters allowed.
func (f *fields) optText(field string, p *string) string {
	if f.err != nil || p == nil {
		return ""
	}
	return f.check(field, *p, false)
}

// tenant returns tenant_id, DefaultTenant when absent.
func (f *fields) tenant(p *string) string {
	if t := f.optName("tenant_id", p); t != "" {
		return t
	}
	return api.DefaultTenant
}

// endpoint validates a ZeroMQ endpoint: transport://address.
func (f *fields) endpoint(field string, p *string, required bool) string {
	var ep string
	if required {
		ep = f.name(field, p)
	} else {
		ep = f.optName(field, p)
	}
	if f.err != nil || ep == "" {
		return ep
	}
	scheme, addr, ok := strings.Cut(ep, "://")
	if !ok || scheme == "" || addr == "" || strings.ContainsAny(ep, " \t") {
		f.err = badRequest(api.ReasonInvalidValue, "%s: %q is not a ZeroMQ endpoint (want transport://address, e.g. tcp://10.0.0.5:5557)", field, clip(ep))
		return ""
	}
	return ep
}

// serving validates an optional serving endpoint (package messages/serving).
func (f *fields) serving(p *string) string {
	ep := f.optName("serving_endpoint", p)
	if f.err != nil || ep == "" {
		return ep
	}
	if _, err := serving.Parse(ep); err != nil {
		f.err = badRequest(api.ReasonInvalidValue, "%v", err)
		return ""
	}
	return ep
}

func (f *fields) check(field, s string, noControl bool) string {
	if len(s) > maxStringBytes {
		f.err = badRequest(api.ReasonTooLong, "%s: %d bytes, at most %d allowed", field, len(s), maxStringBytes)
		return ""
	}
	if noControl {
		for _, c := range []byte(s) {
			if c < 0x20 || c == 0x7f {
				f.err = badRequest(api.ReasonInvalidValue, "%s must not contain control characters", field)
				return ""
			}
		}
	}
	return s
}

func (f *fields) required(field string, present bool) {
	if f.err == nil && !present {
		f.err = badRequest(api.ReasonMissingField, "%s is required", field)
	}
}

// limit keeps e, the answer of a list cap (see limits), unless an error
// came first.
func (f *fields) limit(e *apiError) {
	if f.err == nil {
		f.err = e
	}
}

// The conversions of the bodies into the Backend's requests all take the
// server's limits (see request); the bodies without lists ignore them.

func (b *registerBody) registration(limits) (api.Registration, *apiError) {
	var f fields
	f.required("instance_id", b.InstanceID != nil)
	reg := api.Registration{
		Endpoint:        f.endpoint("endpoint", b.Endpoint, true),
		ModelName:       f.name("model_name", b.ModelName),
		TenantID:        f.tenant(b.TenantID),
		LoraName:        f.optName("lora_name", b.LoraName),
		ReplayEndpoint:  f.endpoint("replay_endpoint", b.ReplayEndpoint, false),
		ServingEndpoint: f.serving(b.ServingEndpoint),
	}
	if f.err != nil {
		return reg, f.err
	}
	reg.InstanceID = messages.WorkerID(*b.InstanceID)
	if b.BlockSize != nil {
		if *b.BlockSize == 0 {
			return reg, badRequest(api.ReasonInvalidValue, "block_size must be positive (omit it for the server's default)")
		}
		reg.BlockSize = *b.BlockSize
	}
	if b.DpRank != nil {
		reg.DpRank = messages.DpRank(*b.DpRank)
	}
	return reg, nil
}

func (b *unregisterBody) workerRef(limits) (api.WorkerRef, *apiError) {
	var f fields
	f.required("instance_id", b.InstanceID != nil)
	ref := api.WorkerRef{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.optName("tenant_id", b.TenantID), // "" = every tenant
	}
	if f.err != nil {
		return ref, f.err
	}
	ref.InstanceID = messages.WorkerID(*b.InstanceID)
	if b.DpRank != nil {
		r := messages.DpRank(*b.DpRank)
		ref.DpRank = &r
	}
	return ref, nil
}

func (b *queryBody) query(l limits) (api.QueryRequest, *apiError) {
	var f fields
	f.required("token_ids", b.TokenIDs != nil)
	q := api.QueryRequest{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.tenant(b.TenantID),
		LoraName:  f.optName("lora_name", b.LoraName),
		CacheSalt: f.optText("cache_salt", b.CacheSalt),
	}
	f.limit(l.tokens(len(b.TokenIDs)))
	q.TokenIDs = b.TokenIDs
	return q, f.err
}

func (b *queryByHashBody) query(l limits) (api.QueryByHashRequest, *apiError) {
	var f fields
	f.required("block_hashes", b.BlockHashes != nil)
	q := api.QueryByHashRequest{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.tenant(b.TenantID),
	}
	f.limit(l.hashes(len(b.BlockHashes)))
	q.BlockHashes = b.BlockHashes
	return q, f.err
}

func (b *routeBody) route(l limits) (api.RouteRequest, *apiError) {
	var f fields
	req := api.RouteRequest{
		ModelName: f.name("model_name", b.ModelName),
		TenantID:  f.tenant(b.TenantID),
		LoraName:  f.optName("lora_name", b.LoraName),
		CacheSalt: f.optText("cache_salt", b.CacheSalt),
		SessionID: f.optText("session_id", b.SessionID),
		RequestID: f.optName("request_id", b.RequestID),
	}
	if f.err != nil {
		return req, f.err
	}
	switch {
	case b.TokenIDs == nil && b.BlockHashes == nil:
		return req, badRequest(api.ReasonMissingField, "one of token_ids and block_hashes is required")
	case b.TokenIDs != nil && b.BlockHashes != nil:
		return req, badRequest(api.ReasonInvalidValue, "token_ids and block_hashes are exclusive: send one")
	case b.BlockHashes != nil && (req.LoraName != "" || req.CacheSalt != ""):
		return req, badRequest(api.ReasonInvalidValue, "lora_name and cache_salt apply to token_ids; block_hashes are already namespaced")
	}
	if req.RequestID != "" {
		if e := checkRequestID(req.RequestID); e != nil {
			return req, e
		}
	}
	if b.TokenIDs != nil {
		if e := l.tokens(len(b.TokenIDs)); e != nil {
			return req, e
		}
		req.TokenIDs = b.TokenIDs
	} else {
		if e := l.hashes(len(b.BlockHashes)); e != nil {
			return req, e
		}
		req.BlockHashes = b.BlockHashes
	}
	if b.IncludeScores != nil {
		req.IncludeScores = *b.IncludeScores
	}
	return req, nil
}

// checkRequestID accepts 1–128 characters of [A-Za-z0-9._~:-]: ids travel
// in URL paths and logs.
func checkRequestID(id string) *apiError {
	if id == "" || len(id) > maxRequestIDBytes {
		return badRequest(api.ReasonInvalidValue, "request_id must be 1 to %d characters", maxRequestIDBytes)
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '~', c == ':', c == '-':
		default:
			return badRequest(api.ReasonInvalidValue, "request_id %q: only letters, digits and . _ ~ : - are allowed", clip(id))
		}
	}
	return nil
}
