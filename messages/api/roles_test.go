package api

import "testing"

func TestParseRole(t *testing.T) {
	for in, want := range map[string]string{"": "", "both": "", "prefill-decode": "", "prefill": RolePrefill, " decode ": RoleDecode} {
		if got, err := ParseRole(in); err != nil || got != want {
			t.Errorf("ParseRole(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"Prefill", "encode", "prefill,decode"} {
		if _, err := ParseRole(bad); err == nil {
			t.Errorf("ParseRole(%q) accepted", bad)
		}
	}
}

func TestCheckBootstrapHost(t *testing.T) {
	for _, ok := range []string{"", "10.0.0.7", "prefill-0.prefill.svc", "fd00::7"} {
		if err := CheckBootstrapHost(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.7:8998", "http://x", "a b", "x/y", "[fd00::7]"} {
		if err := CheckBootstrapHost(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
