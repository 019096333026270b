package httpapi

// Error answers: the status, reason label and message of every 4xx the
// request decoding gives, and how encoding/json's errors map to them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/kvrouter/kvrouter/messages/api"
)

// statusClientClosed is nginx's "client closed request": logged and counted
// only, as nobody reads it.
const statusClientClosed = 499

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

// clip shortens a client-supplied string for an error message.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// tooMany is the 413 of a list of n items when more than max are.
func tooMany(reason, field, items string, n, max int) *apiError {
	if n > max {
		return &apiError{status: http.StatusRequestEntityTooLarge, reason: reason,
			msg: fmt.Sprintf("%s: %d %s, at most %d allowed", field, n, items, max)}
	}
	return nil
}
