package httpapi

// Field checks: the string fields' caps and character rules, the first
// error kept.

import (
	"net/url"
	"strings"

	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// maxStringBytes caps every string field (names, endpoints, salts, ids), as
// messages/wire caps the strings it keeps.
const maxStringBytes = 4096

// maxRequestIDBytes caps request ids: they travel in URL paths.
const maxRequestIDBytes = 128

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

// events validates the optional events mode: "" (absent) or "zmq" is a
// worker that publishes KV events ("" in the Registration), "none" one
// that publishes none.
func (f *fields) events(p *string) string {
	v := f.optName("events", p)
	switch {
	case f.err != nil:
		return ""
	case v == "" || v == api.EventsZMQ:
		return ""
	case v == api.EventsNone:
		return v
	}
	f.err = badRequest(api.ReasonInvalidValue, "events: %q (want %q or %q)", clip(v), api.EventsZMQ, api.EventsNone)
	return ""
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

// metricsURL validates an optional metrics endpoint: an http(s) URL with
// a host.
func (f *fields) metricsURL(p *string) string {
	raw := f.optName("metrics_endpoint", p)
	if f.err != nil || raw == "" {
		return raw
	}
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		f.err = badRequest(api.ReasonInvalidValue, "metrics_endpoint: %q is not an http(s) URL (want e.g. http://10.0.0.5:8000/metrics)", clip(raw))
		return ""
	}
	return raw
}

// engine validates the optional engine choice: auto or a registered
// engine ("" when absent: the Backend's default).
func (f *fields) engine(p *string) string {
	name := f.optName("engine", p)
	if f.err != nil || name == "" {
		return name
	}
	if _, err := engine.Choose(name); err != nil {
		f.err = badRequest(api.ReasonInvalidValue, "engine %q is not known: want one of %s", clip(name), strings.Join(engine.Choices(), ", "))
		return ""
	}
	return name
}

// role validates the optional disaggregation role (api.ParseRole): the
// stored form, "" for both.
func (f *fields) role(p *string) string {
	name := f.optName("role", p)
	if f.err != nil || name == "" {
		return ""
	}
	r, err := api.ParseRole(name)
	if err != nil {
		f.err = badRequest(api.ReasonInvalidValue, "%v", err)
	}
	return r
}

// bootstrapHost validates the optional SGLang bootstrap host.
func (f *fields) bootstrapHost(p *string) string {
	h := f.optName("bootstrap_host", p)
	if f.err == nil {
		if err := api.CheckBootstrapHost(h); err != nil {
			f.err = badRequest(api.ReasonInvalidValue, "%v", err)
			return ""
		}
	}
	return h
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
