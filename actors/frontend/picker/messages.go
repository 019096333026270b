package picker

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Names of the Endpoint Picker Protocol.
const (
	// DestinationHeader is the request header carrying the answer, and
	// DestinationKey its key under DestinationNamespace in the dynamic
	// metadata (the same value in both).
	DestinationHeader    = "x-gateway-destination-endpoint"
	DestinationNamespace = "envoy.lb"
	DestinationKey       = "x-gateway-destination-endpoint"
	// ServedKey (under DestinationNamespace, in a response message's
	// metadata_context) is the endpoint the data plane really used.
	ServedKey = "x-gateway-destination-endpoint-served"
	// SubsetNamespace / SubsetKey (filter metadata of a request message)
	// list the endpoints the picker may choose from.
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
	// PrefillerHeader names the prefill endpoint (host:port) of a request
	// the router split into a remote prefill and a decode leg, for llm-d's
	// routing sidecar on the decode pod (the destination); absent when
	// the request is not split.
	PrefillerHeader = "x-prefiller-host-port"
)

// bodyChunk bounds one streamed body message the picker sends (some data
// planes cap a streamed chunk at 64 KiB; GIE's picker uses the same margin).
const bodyChunk = 62000

// HeaderValue returns a header's value (Envoy lower-cases keys and puts
// values in raw_value), "" when absent.
func HeaderValue(m *corev3.HeaderMap, key string) string {
	for _, h := range m.GetHeaders() {
		if h.GetKey() == key {
			if raw := h.GetRawValue(); len(raw) > 0 {
				return string(raw)
			}
			return h.GetValue()
		}
	}
	return ""
}

// hasHeader reports whether m carries key (any value, any case).
func hasHeader(m *corev3.HeaderMap, key string) bool {
	for _, h := range m.GetHeaders() {
		if strings.EqualFold(h.GetKey(), key) {
			return true
		}
	}
	return false
}

// Subset reads the endpoint subset hint of a request message's metadata:
// a list of "ip:port" strings (a comma-separated string is read too).
// ok is false when the message carries no hint (pick from every worker);
// a hint with no usable entry is ok with an empty list.
func Subset(md *corev3.Metadata) (endpoints []string, ok bool) {
	ns := md.GetFilterMetadata()[SubsetNamespace]
	v, ok := ns.GetFields()[SubsetKey]
	if !ok {
		return nil, false
	}
	endpoints = []string{}
	add := func(s string) {
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				endpoints = append(endpoints, e)
			}
		}
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			add(e.GetStringValue())
		}
	case *structpb.Value_StringValue:
		add(k.StringValue)
	}
	return endpoints, true
}

// ServedEndpoint reads the endpoint that served the request from a
// response message's metadata, "" when it does not say.
func ServedEndpoint(md *corev3.Metadata) string {
	ns := md.GetFilterMetadata()[DestinationNamespace]
	return strings.TrimSpace(ns.GetFields()[ServedKey].GetStringValue())
}

// destinationHeaders sets the destination header (replacing any the client
// sent: a client must not steer the data plane), the prefill endpoint of
// a split request ("" none) and, when the picker gives the body back,
// its length.
func destinationHeaders(dest, prefill string, bodyLen int) []*corev3.HeaderValueOption {
	hs := []*corev3.HeaderValueOption{{
		Header:       &corev3.HeaderValue{Key: DestinationHeader, RawValue: []byte(dest)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}}
	if prefill != "" {
		hs = append(hs, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: PrefillerHeader, RawValue: []byte(prefill)},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	if bodyLen > 0 {
		hs = append(hs, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: "content-length", RawValue: []byte(strconv.Itoa(bodyLen))},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	return hs
}

// destinationMetadata is the dynamic metadata carrying the answer.
func destinationMetadata(dest string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		DestinationNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			DestinationKey: structpb.NewStringValue(dest),
		}}),
	}}
}

// headersResponse answers request headers (request true: with the route
// cache cleared, as the destination changed) or response headers.
func headersResponse(request bool, set []*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	c := &extprocv3.CommonResponse{ClearRouteCache: request && set != nil}
	if set != nil {
		c.HeaderMutation = &extprocv3.HeaderMutation{SetHeaders: set}
	}
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: c}}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: c}}}
}

// trailersResponse answers request or response trailers unchanged.
func trailersResponse(request bool) *extprocv3.ProcessingResponse {
	if request {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
		ResponseTrailers: &extprocv3.TrailersResponse{}}}
}

// streamedBodies gives a body back in FULL_DUPLEX_STREAMED mode: chunks of
// at most bodyChunk bytes, the last one carrying end (at least one message,
// empty for an empty body).
func streamedBodies(body []byte, end, request bool) []*extprocv3.ProcessingResponse {
	var out []*extprocv3.ProcessingResponse
	for first := true; first || len(body) > 0; first = false {
		n := min(len(body), bodyChunk)
		chunk := &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
			Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{
				Body: body[:n], EndOfStream: end && n == len(body)}}}}}
		body = body[n:]
		if request {
			out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: chunk}})
		} else {
			out = append(out, &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: chunk}})
		}
	}
	return out
}

// immediate is a local reply: status code, a text body saying why, and
// details for the data plane's access log.
func immediate(code typev3.StatusCode, body, details string, hs ...*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	ir := &extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: code}, Body: []byte(body), Details: details}
	if len(hs) > 0 {
		ir.Headers = &extprocv3.HeaderMutation{SetHeaders: hs}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir}}
}
