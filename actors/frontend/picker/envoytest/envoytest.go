// Package envoytest is a fake Envoy for tests and benchmarks: the messages
// Envoy's ext_proc filter sends, built as it builds them (lower-case header
// keys, values in raw_value, protocol_config on the first message,
// metadata_context carrying the forwarded filter metadata), and a client
// that drives ext_proc streams over a real gRPC connection with the
// generated client, in the order Envoy drives them. It spells the
// protocol's names itself, so a picker using the wrong ones fails.
package envoytest

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// The Endpoint Picker Protocol's names, as the data plane uses them.
const (
	destinationHeader    = "x-gateway-destination-endpoint"
	destinationNamespace = "envoy.lb"
	destinationKey       = "x-gateway-destination-endpoint"
	servedKey            = "x-gateway-destination-endpoint-served"
	subsetNamespace      = "envoy.lb.subset_hint"
	subsetKey            = "x-gateway-destination-endpoint-subset"
	// prefillerHeader is llm-d's: the prefill endpoint of a split request,
	// for the routing sidecar on the decode pod.
	prefillerHeader = "x-prefiller-host-port"
)

// Modes are the filter's body send modes (the picker's Modes converts).
type Modes struct {
	Request, Response filterv3.ProcessingMode_BodySendMode
}

var (
	// FullDuplex is llm-d's configuration.
	FullDuplex = Modes{filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED}
	// Buffered is AIBrix's configuration: request BUFFERED, response STREAMED.
	Buffered = Modes{filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED}
	// Streamed sends the body in chunks, each answered before the next.
	Streamed = Modes{filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_STREAMED}
)

func headerMap(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

// RequestHeaders is the first message of a stream: protocol_config with
// the filter's modes (nil: an Envoy too old to send it).
func RequestHeaders(modes *Modes, path string, eos bool, md *corev3.Metadata, extra ...string) *extprocv3.ProcessingRequest {
	h := headerMap(append([]string{":method", "POST", ":path", path, ":authority", "gateway", "content-type", "application/json"}, extra...)...)
	r := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: h, EndOfStream: eos}}, MetadataContext: md}
	if modes != nil {
		r.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: modes.Request, ResponseBodyMode: modes.Response}
	}
	return r
}

// RequestBody is one request body chunk (eos: the last).
func RequestBody(b string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}}
}

// RequestTrailers ends a request body that has trailers.
func RequestTrailers() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{
		RequestTrailers: &extprocv3.HttpTrailers{Trailers: headerMap("x-trailer", "1")}}}
}

// Served is the metadata_context of a response message: the endpoint the
// upstream connection went to ("" : none reported).
func Served(ep string) *corev3.Metadata {
	if ep == "" {
		return nil
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		destinationNamespace: {Fields: map[string]*structpb.Value{servedKey: structpb.NewStringValue(ep)}}}}
}

// SubsetHint is a request's filter metadata restricting the endpoints.
func SubsetHint(eps ...string) *corev3.Metadata {
	vals := make([]any, len(eps))
	for i, e := range eps {
		vals[i] = e
	}
	l, _ := structpb.NewList(vals)
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		subsetNamespace: {Fields: map[string]*structpb.Value{subsetKey: structpb.NewListValue(l)}}}}
}

// ResponseHeaders are the upstream's response headers, with the served
// endpoint Envoy reports ("": none); eos: a response without a body.
func ResponseHeaders(code, servedEp string, eos bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(":status", code, "content-type", "text/event-stream"), EndOfStream: eos}},
		MetadataContext: Served(servedEp)}
}

// ResponseBody is one response body chunk (eos: the last).
func ResponseBody(b string, eos bool, servedEp string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}, MetadataContext: Served(servedEp)}
}

// ResponseTrailers end a response that has trailers.
func ResponseTrailers() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{
		ResponseTrailers: &extprocv3.HttpTrailers{Trailers: headerMap("grpc-status", "0")}}}
}

var shortNames = map[string]string{"request_headers": "req_headers", "request_body": "req_body", "request_trailers": "req_trailers",
	"response_headers": "resp_headers", "response_body": "resp_body", "response_trailers": "resp_trailers"}

// Describe writes a response compactly, for tables of expected answers:
// "req_headers dest=a:1,b:1 prefiller=p:1 len=57 clear meta=a:1,b:1" (a
// removed header as -name), "req_body streamed=57 eos",
// "resp_body", "immediate 503".
func Describe(r *extprocv3.ProcessingResponse) string {
	var b strings.Builder
	common := func(c *extprocv3.CommonResponse) {
		for _, h := range c.GetHeaderMutation().GetSetHeaders() {
			switch h.GetHeader().GetKey() {
			case destinationHeader:
				fmt.Fprintf(&b, " dest=%s", h.GetHeader().GetRawValue())
				if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
					b.WriteString("(appended!)")
				}
			case "content-length":
				fmt.Fprintf(&b, " len=%s", h.GetHeader().GetRawValue())
			case prefillerHeader:
				fmt.Fprintf(&b, " prefiller=%s", h.GetHeader().GetRawValue())
				if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
					b.WriteString("(appended!)")
				}
			default:
				fmt.Fprintf(&b, " %s=%s", h.GetHeader().GetKey(), h.GetHeader().GetRawValue())
			}
		}
		for _, k := range c.GetHeaderMutation().GetRemoveHeaders() {
			fmt.Fprintf(&b, " -%s", k)
		}
		if sr := c.GetBodyMutation().GetStreamedResponse(); sr != nil {
			fmt.Fprintf(&b, " streamed=%d", len(sr.GetBody()))
			if sr.GetEndOfStream() {
				b.WriteString(" eos")
			}
		}
		if c.GetClearRouteCache() {
			b.WriteString(" clear")
		}
	}
	m := r.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("response"))
	switch {
	case fd == nil:
		b.WriteString("empty")
	case r.GetImmediateResponse() != nil:
		fmt.Fprintf(&b, "immediate %d", r.GetImmediateResponse().GetStatus().GetCode())
		for _, h := range r.GetImmediateResponse().GetHeaders().GetSetHeaders() {
			fmt.Fprintf(&b, " %s=%s", h.GetHeader().GetKey(), h.GetHeader().GetRawValue())
		}
	default:
		b.WriteString(shortNames[string(fd.Name())])
		if hr, ok := m.Get(fd).Message().Interface().(interface {
			GetResponse() *extprocv3.CommonResponse
		}); ok {
			common(hr.GetResponse())
		}
	}
	if md := r.GetDynamicMetadata(); md != nil {
		fmt.Fprintf(&b, " meta=%s", md.GetFields()[destinationNamespace].GetStructValue().GetFields()[destinationKey].GetStringValue())
	}
	return b.String()
}
