package httpapi

// Reading a request body: size cap, content type, then the fast path or
// encoding/json (decodeBody).

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

	"github.com/kvrouter/kvrouter/messages/api"
)

// decodeBody reads r's JSON object body into dst (a pointer to a body
// struct). strict rejects unknown fields. Every failure is a 4xx.
//
// The body is read whole (at most maxBytes) and then decoded: by the fast
// path (handjson.go) when dst has one and the body is plain, otherwise by
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
