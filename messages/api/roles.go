package api

import (
	"fmt"
	"net"
	"strings"
)

// RolePrefillDecode is llm-d's name for RoleBoth (the llm-d.ai/role pod
// label's value for an engine that does both); ParseRole accepts it.
const RolePrefillDecode = "prefill-decode"

// ParseRole reads a role as a registration, a flag, a workers file or a
// pod label writes it: prefill, decode, both or prefill-decode (both),
// "" for both. The result is stored form: RolePrefill, RoleDecode, or ""
// for both (so a registration without a role reads as before roles
// existed). The error names the values it accepts.
func ParseRole(s string) (string, error) {
	switch strings.TrimSpace(s) {
	case "", RoleBoth, RolePrefillDecode:
		return "", nil
	case RolePrefill:
		return RolePrefill, nil
	case RoleDecode:
		return RoleDecode, nil
	}
	return "", fmt.Errorf("role %q is not known: want prefill, decode, both or prefill-decode", clipRole(s))
}

// CheckBootstrapHost checks an SGLang bootstrap host: a host name or IP
// address without port, scheme or path ("" is allowed: the serving
// endpoint's host).
func CheckBootstrapHost(h string) error {
	if h == "" {
		return nil
	}
	if len(h) > 253 || strings.ContainsAny(h, ":/?#@ \t[]") && !isIPv6(h) {
		return fmt.Errorf("bootstrap host %q: want a host name or IP address (no port, scheme or path)", clipRole(h))
	}
	for _, c := range []byte(h) {
		if c < 0x21 || c == 0x7f {
			return fmt.Errorf("bootstrap host %q: control or space characters", clipRole(h))
		}
	}
	return nil
}

// isIPv6 reports whether h is a bare IPv6 literal.
func isIPv6(h string) bool { return strings.Contains(h, ":") && net.ParseIP(h) != nil }

func clipRole(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
