package picker

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
)

// The Gateway API Inference Extension conformance suite's test hooks: a
// request header naming the endpoints the picker must choose from, and a
// response header echoing the endpoint the data plane served from. They
// let a client steer its request, so the picker reads them only when
// StreamConfig.ConformanceHooks is set (kvrouter serve
// --epp-conformance-hooks, off by default).
const (
	SelectionHeader      = "test-epp-endpoint-selection"
	ServedEndpointHeader = "x-conformance-test-served-endpoint"
)

// selection reads the selection header: a comma list of "ip" or
// "ip:port" (ok false: no header). With a subset hint too, only the
// entries the hint allows are kept.
func selection(h *corev3.HeaderMap, subset []string, subsetted bool) (eps []string, ok bool) {
	v := HeaderValue(h, SelectionHeader)
	if strings.TrimSpace(v) == "" {
		return nil, false
	}
	eps = []string{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" && (!subsetted || requestpath.InSubset(subset, e)) {
			eps = append(eps, e)
		}
	}
	return eps, true
}

// servedHeader is the response header mutation echoing the served
// endpoint.
func servedHeader(ep string) []*corev3.HeaderValueOption {
	return []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: ServedEndpointHeader, RawValue: []byte(ep)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}}
}
