package picker

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// Modes are the data plane's body send modes for one HTTP stream.
type Modes struct {
	Request, Response filterv3.ProcessingMode_BodySendMode
}

// StreamConfig configures every Stream of a server.
type StreamConfig struct {
	// Modes are assumed when the data plane's first message carries no
	// protocol_config (recent Envoys send it); zero: NONE, i.e. route
	// on the headers alone.
	Modes Modes
	// MaxBody bounds a request body the picker holds (413 past it).
	MaxBody int
	// MaxEndpoints bounds the endpoint list: the choice and its fallbacks.
	MaxEndpoints int

	// DefaultModel is the model of a request whose body the picker does
	// not see (no body, or a body mode that sends none before the headers
	// are answered) and that carries no x-gateway-model-name header.
	DefaultModel string
	// ConformanceHooks reads the conformance suite's selection header and
	// echoes the served endpoint (conformance.go); off, both are ignored.
	ConformanceHooks bool
}

// ActionKind is what a Stream asks its owner to do.
type ActionKind uint8

// Action kinds.
const (
	// Send: send Response to the data plane.
	Send ActionKind = iota + 1
	// Route: resolve Prompt's token ids into Request, call Core.Pick and
	// feed the answer to Decide.
	Route
	// Served: call Core.Served with Endpoint.
	Served
	// FirstByte: call Core.FirstByte.
	FirstByte
	// Done: call Core.Done.
	Done
	// Answered: call the Core's Answered (when it has one) with Endpoint
	// (the served one, "" when not reported) and Status.
	Answered
	// Decided: count Outcome (and Reason when routed by load only);
	// Endpoint is the answer given, Err the refusal's cause.
	Decided
	// End: close the ext_proc stream (after an immediate response).
	End
	// Fail: close the ext_proc stream with Err (the data plane broke the
	// protocol).
	Fail
)

// Action is one instruction from a Stream.
type Action struct {
	Kind     ActionKind
	Response *extprocv3.ProcessingResponse
	Prompt   Prompt
	Request  Request
	Endpoint string
	Outcome  Outcome
	Reason   string
	Status   int
	Err      error
}

// Decision is the answer to a Route action: the router's choice or
// refusal, and why the request went by load only ("" when its token ids
// were routed).
type Decision struct {
	Choice Choice
	Reason string
	Err    error
}

type phase uint8

const (
	phHeaders  phase = iota // expecting the request headers
	phBody                  // collecting the request body
	phRouting               // waiting for Decide
	phUpstream              // the request is answered; expecting the response
	phResponse              // response headers answered
	phClosed                // answered with an immediate response, or reset
)

// Stream is the Endpoint Picker Protocol for one ext_proc stream (one HTTP
// request): a pure state machine. The owner feeds it every message the data
// plane sends (Handle), the router's answer (Decide) and the end of the
// stream (Reset), and carries out the returned Actions in order. It asks
// for FirstByte at most once and for Done exactly once for every request
// it routed.
type Stream struct {
	cfg   StreamConfig
	id    string
	modes Modes
	phase phase

	started   bool
	path      string
	model     string // from x-gateway-model-name
	fairness  string // from x-gateway-inference-fairness-id / x-llm-d-inference-fairness-id
	objective string // from x-gateway-inference-objective / x-llm-d-inference-objective
	subset    []string
	subsetted bool
	body      []byte
	trailers  bool // the request body ended with trailers
	onHeaders bool // routed on the headers: the body is not held
	// clientPrefiller: the request came with x-prefiller-host-port, which
	// only the picker may set (removed unless the request is split).
	clientPrefiller bool

	booked, served, firstByte, done bool
}

// NewStream returns the state of a new ext_proc stream; id names its
// booking.
func NewStream(cfg StreamConfig, id string) *Stream {
	return &Stream{cfg: cfg, id: id, modes: cfg.Modes}
}

// Modes returns the body modes in force (the data plane's, once its first
// message said).
func (s *Stream) Modes() Modes { return s.modes }

var errProtocol = errors.New("ext_proc protocol")

func fail(what string) []Action {
	return []Action{{Kind: Fail, Err: errors.Join(errProtocol, errors.New(what))}}
}

// Handle takes one message from the data plane.
func (s *Stream) Handle(req *extprocv3.ProcessingRequest) []Action {
	if s.phase == phClosed {
		return nil // after an immediate response the data plane ignores us
	}
	if !s.started {
		s.started = true
		if pc := req.GetProtocolConfig(); pc != nil {
			s.modes = Modes{Request: pc.GetRequestBodyMode(), Response: pc.GetResponseBodyMode()}
		}
	}
	md := req.GetMetadataContext()
	switch v := req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return s.requestHeaders(v.RequestHeaders, md)
	case *extprocv3.ProcessingRequest_RequestBody:
		return s.requestBody(v.RequestBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return s.requestTrailers()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return s.responseHeaders(v.ResponseHeaders, md)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return s.responseBody(v.ResponseBody, md)
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return s.response(md, true, trailersResponse(false))
	}
	return nil // flow control only
}

// bodyHeld reports whether the request body mode lets the picker read the
// whole body before it answers the headers' routing.
func (s *Stream) bodyHeld() bool {
	return s.modes.Request == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
		s.modes.Request == filterv3.ProcessingMode_BUFFERED
}

func (s *Stream) requestHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) []Action {
	if s.phase != phHeaders {
		return fail("request headers twice")
	}
	s.path = HeaderValue(h.GetHeaders(), ":path")
	s.clientPrefiller = hasHeader(h.GetHeaders(), PrefillerHeader)
	s.model = HeaderValue(h.GetHeaders(), "x-gateway-model-name")
	if s.fairness = HeaderValue(h.GetHeaders(), "x-gateway-inference-fairness-id"); s.fairness == "" {
		s.fairness = HeaderValue(h.GetHeaders(), "x-llm-d-inference-fairness-id")
	}
	if s.objective = HeaderValue(h.GetHeaders(), "x-gateway-inference-objective"); s.objective == "" {
		s.objective = HeaderValue(h.GetHeaders(), "x-llm-d-inference-objective")
	}
	s.subset, s.subsetted = Subset(md)
	if s.cfg.ConformanceHooks {
		if sel, ok := selection(h.GetHeaders(), s.subset, s.subsetted); ok {
			s.subset, s.subsetted = sel, true
		}
	}
	if h.GetEndOfStream() || !s.bodyHeld() {
		s.onHeaders = true
		model := s.model
		if model == "" {
			model = s.cfg.DefaultModel
		}
		return s.route(Prompt{Model: model, Reason: ReasonNoBody})
	}
	s.phase = phBody
	if s.modes.Request == filterv3.ProcessingMode_BUFFERED {
		// Envoy waits for this answer before it buffers the body; the
		// destination goes in the body's answer (header mutations there
		// apply in BUFFERED mode only).
		return []Action{send(headersResponse(true, nil))}
	}
	return nil
}

func (s *Stream) requestBody(b *extprocv3.HttpBody) []Action {
	switch {
	case s.phase == phBody:
		if len(s.body)+len(b.GetBody()) > s.cfg.MaxBody {
			s.body = nil
			return s.refuse(OutcomeTooLarge, typev3.StatusCode_PayloadTooLarge, "request body larger than the picker accepts")
		}
		s.body = append(s.body, b.GetBody()...)
		if b.GetEndOfStream() || s.modes.Request == filterv3.ProcessingMode_BUFFERED {
			return s.routeBody() // BUFFERED sends the whole body in one message
		}
		return nil
	case s.onHeaders && s.phase >= phUpstream:
		// STREAMED and partial modes: every chunk is answered unchanged.
		return []Action{send(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{}}}})}
	}
	return fail("request body out of order")
}

func (s *Stream) requestTrailers() []Action {
	switch {
	case s.phase == phBody:
		s.trailers = true
		return s.routeBody()
	case s.phase >= phUpstream:
		return []Action{send(trailersResponse(true))}
	}
	return fail("request trailers out of order")
}

// routeBody reads the complete body and asks for a decision.
func (s *Stream) routeBody() []Action {
	p, err := ParsePrompt(s.path, s.body)
	if err != nil {
		return s.refuse(OutcomeInvalid, typev3.StatusCode_BadRequest, err.Error())
	}
	return s.route(p)
}

func (s *Stream) route(p Prompt) []Action {
	if s.subsetted && len(s.subset) == 0 {
		return s.refuse(OutcomeSubset, typev3.StatusCode_ServiceUnavailable, "the endpoint subset is empty")
	}
	s.phase = phRouting
	return []Action{{Kind: Route, Prompt: p, Request: Request{ID: s.id, Model: p.Model,
		Subset: s.subset, Subsetted: s.subsetted, MaxEndpoints: max(s.cfg.MaxEndpoints, 1), EstimatedTokens: len(s.body) / 4,
		FairnessID: s.fairness, Objective: s.objective, Bytes: len(s.body)}}}
}

// Decide takes the answer to the Route action.
func (s *Stream) Decide(d Decision) []Action {
	c, err := d.Choice, d.Err
	if s.phase != phRouting {
		return fail("decision without a route")
	}
	switch {
	case errors.Is(err, ErrRateLimited):
		return s.refuse(OutcomeRateLimited, typev3.StatusCode_TooManyRequests, err.Error(), retryAfter(err)...)
	case errors.Is(err, ErrOverloaded):
		return s.refuse(OutcomeOverloaded, typev3.StatusCode_TooManyRequests, err.Error(), retryAfter(err)...)
	case errors.Is(err, ErrNoEndpoint) && s.subsetted:
		return s.refuse(OutcomeSubset, typev3.StatusCode_ServiceUnavailable, err.Error())
	case errors.Is(err, ErrNoEndpoint):
		return s.refuse(OutcomeNoEndpoint, typev3.StatusCode_ServiceUnavailable, err.Error())
	case errors.Is(err, ErrInvalid):
		return s.refuse(OutcomeInvalid, typev3.StatusCode_BadRequest, err.Error())
	case err != nil:
		return s.refuse(OutcomeError, typev3.StatusCode_InternalServerError, err.Error())
	case len(c.Endpoints) == 0:
		return s.refuse(OutcomeError, typev3.StatusCode_InternalServerError, "the router chose no endpoint")
	}
	s.booked, s.phase = true, phUpstream
	dest := strings.Join(c.Endpoints, ",")
	md := destinationMetadata(dest)
	var out []Action
	switch {
	case s.onHeaders:
		r := headersResponse(true, nil)
		r.GetRequestHeaders().Response = s.routed(dest, c.Prefill, 0)
		r.DynamicMetadata = md
		out = append(out, send(r))
	case s.modes.Request == filterv3.ProcessingMode_BUFFERED:
		r := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: s.routed(dest, c.Prefill, 0)}}, DynamicMetadata: md}
		out = append(out, send(r))
		if s.trailers {
			out = append(out, send(trailersResponse(true)))
		}
	default: // FULL_DUPLEX_STREAMED: headers, then the body given back, then trailers
		r := headersResponse(true, nil)
		r.GetRequestHeaders().Response = s.routed(dest, c.Prefill, len(s.body))
		r.DynamicMetadata = md
		out = append(out, send(r))
		for _, b := range streamedBodies(s.body, !s.trailers, true) {
			out = append(out, send(b))
		}
		if s.trailers {
			out = append(out, send(trailersResponse(true)))
		}
	}
	s.body = nil
	outcome := OutcomeRouted
	if d.Reason != "" {
		outcome = OutcomeLoadOnly
	}
	return append(out, Action{Kind: Decided, Outcome: outcome, Reason: d.Reason, Endpoint: dest})
}

// routed is the answer carrying the destination: its headers (the
// prefill endpoint's when split; a client's x-prefiller-host-port
// removed when not), the route cache cleared.
func (s *Stream) routed(dest, prefill string, bodyLen int) *extprocv3.CommonResponse {
	m := &extprocv3.HeaderMutation{SetHeaders: destinationHeaders(dest, prefill, bodyLen)}
	if prefill == "" && s.clientPrefiller {
		m.RemoveHeaders = []string{PrefillerHeader}
	}
	return &extprocv3.CommonResponse{HeaderMutation: m, ClearRouteCache: true}
}

// retryAfter is the retry-after header of a refusal that says when to
// try again (none otherwise).
func retryAfter(err error) []*corev3.HeaderValueOption {
	var ra RetryAfterer
	if !errors.As(err, &ra) {
		return nil
	}
	secs := max(int(math.Ceil(ra.RetryAfter().Seconds())), 1)
	return []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "retry-after", RawValue: []byte(strconv.Itoa(secs))}}}
}

// refuse answers with an immediate response (with headers hs) and ends
// the stream.
func (s *Stream) refuse(o Outcome, code typev3.StatusCode, msg string, hs ...*corev3.HeaderValueOption) []Action {
	s.phase = phClosed
	return []Action{send(immediate(code, msg, "kvrouter_"+o.String(), hs...)),
		{Kind: Decided, Outcome: o, Err: errors.New(msg)}, {Kind: End}}
}

// responseHeaders answers the response headers unchanged and reports
// their status for the endpoint that answered.
func (s *Stream) responseHeaders(h *extprocv3.HttpHeaders, md *corev3.Metadata) []Action {
	var set []*corev3.HeaderValueOption
	if ep := ServedEndpoint(md); ep != "" && s.cfg.ConformanceHooks {
		set = servedHeader(ep) // the conformance suite's echo (conformance.go)
	}
	out := s.response(md, false, headersResponse(false, set))
	if out[0].Kind == Fail {
		return out
	}
	if code, err := strconv.Atoi(HeaderValue(h.GetHeaders(), ":status")); err == nil && s.booked {
		out = append(out, Action{Kind: Answered, Endpoint: ServedEndpoint(md), Status: code})
	}
	if h.GetEndOfStream() {
		out = append(out, s.free()...)
	}
	return out
}

func (s *Stream) responseBody(b *extprocv3.HttpBody, md *corev3.Metadata) []Action {
	if s.modes.Response != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		return s.response(md, b.GetEndOfStream(), &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{}}}}, firstByte)
	}
	// FULL_DUPLEX_STREAMED: every chunk is given back (the data plane sends
	// on only what the picker returns).
	rs := streamedBodies(b.GetBody(), b.GetEndOfStream(), false)
	out := s.response(md, false, rs[0], firstByte)
	if out[0].Kind == Fail {
		return out
	}
	rest := make([]Action, 0, len(rs)+len(out))
	for _, r := range rs[1:] {
		rest = append(rest, send(r))
	}
	out = slices.Insert(out, 1, rest...)
	if b.GetEndOfStream() {
		out = append(out, s.free()...)
	}
	return out
}

// firstByte marks a response message that carries the body.
const firstByte = true

// response answers one response message with r: the served endpoint when
// the message reports it, prefill done at the first body chunk, the
// booking freed at the end of the response.
func (s *Stream) response(md *corev3.Metadata, end bool, r *extprocv3.ProcessingResponse, body ...bool) []Action {
	if s.phase != phUpstream && s.phase != phResponse {
		return fail("response before the request was routed")
	}
	s.phase = phResponse
	// The answer goes first: the bookkeeping must not delay a token.
	out := []Action{send(r)}
	if ep := ServedEndpoint(md); ep != "" && !s.served && s.booked {
		s.served = true
		out = append(out, Action{Kind: Served, Endpoint: ep})
	}
	if len(body) > 0 && !s.firstByte && s.booked {
		s.firstByte = true
		out = append(out, Action{Kind: FirstByte})
	}
	if end {
		out = append(out, s.free()...)
	}
	return out
}

// Reset ends the stream: the data plane closed it or it broke. A routed
// request not yet freed is freed now.
func (s *Stream) Reset() []Action {
	s.phase, s.body = phClosed, nil
	return s.free()
}

func (s *Stream) free() []Action {
	if !s.booked || s.done {
		return nil
	}
	s.done = true
	return []Action{{Kind: Done}}
}

func send(r *extprocv3.ProcessingResponse) Action { return Action{Kind: Send, Response: r} }
