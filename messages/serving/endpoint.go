// Package serving is the serving address of an engine worker: where the
// request path (the OpenAI proxy, the endpoint picker) sends a request
// once the router has chosen the (worker, dp_rank). A registration's
// serving_endpoint is optional: a worker without one is still indexed and
// routed by POST /route, but the request path skips it (and counts why).
//
// Accepted forms, as registrations carry them:
//
//	10.0.0.5:8000            host:port (what Envoy and the picker use)
//	http://10.0.0.5:8000     with a scheme, for the proxy (http or https)
//	[fd00::5]:8000           IPv6 in brackets
//
// No path, query or user info: the proxy appends the request's own path.
package serving

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Endpoint is a parsed serving address.
type Endpoint struct {
	// Scheme is "http" or "https"; "" when the registration named none
	// (the proxy then uses http).
	Scheme string
	// HostPort is host:port, as net.JoinHostPort writes it.
	HostPort string
}

// Parse checks a serving endpoint ("host:port" or "scheme://host:port")
// and returns it parsed. The error says what is wrong, for a 400 answer.
func Parse(s string) (Endpoint, error) {
	var e Endpoint
	rest := s
	if scheme, addr, ok := strings.Cut(s, "://"); ok {
		if scheme != "http" && scheme != "https" {
			return e, fmt.Errorf("serving endpoint %q: scheme %q is not http or https", s, scheme)
		}
		e.Scheme, rest = scheme, addr
	}
	if strings.ContainsAny(rest, "/?#@ \t") {
		return e, fmt.Errorf("serving endpoint %q: want host:port or http://host:port (no path, query or user)", s)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return e, fmt.Errorf("serving endpoint %q: want host:port or http://host:port: %v", s, err)
	}
	if host == "" {
		return e, fmt.Errorf("serving endpoint %q: no host", s)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return e, fmt.Errorf("serving endpoint %q: port %q is not a number in 1..65535", s, port)
	}
	e.HostPort = net.JoinHostPort(host, port)
	return e, nil
}

// BaseURL is the URL prefix the proxy sends requests to: scheme://host:port
// (http when the registration named no scheme).
func (e Endpoint) BaseURL() string {
	scheme := e.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + e.HostPort
}

// String is the endpoint as a registration writes it.
func (e Endpoint) String() string {
	if e.Scheme == "" {
		return e.HostPort
	}
	return e.Scheme + "://" + e.HostPort
}
