package serving

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string]struct{ scheme, hostPort, base string }{
		"10.0.0.5:8000":        {"", "10.0.0.5:8000", "http://10.0.0.5:8000"},
		"http://engine-0:8000": {"http", "engine-0:8000", "http://engine-0:8000"},
		"https://a.b:443":      {"https", "a.b:443", "https://a.b:443"},
		"[fd00::5]:8000":       {"", "[fd00::5]:8000", "http://[fd00::5]:8000"},
	} {
		e, err := Parse(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if e.Scheme != want.scheme || e.HostPort != want.hostPort || e.BaseURL() != want.base || e.String() != in {
			t.Errorf("%q: parsed %+v (base %s, string %s), want %+v", in, e, e.BaseURL(), e.String(), want)
		}
	}
	for _, bad := range []string{"", "10.0.0.5", ":8000", "h:0", "h:70000", "h:port", "tcp://h:1",
		"http://h:1/v1", "http://u@h:1", "h:1?x", "http://", "h :1"} {
		if e, err := Parse(bad); err == nil {
			t.Errorf("%q accepted as %+v", bad, e)
		}
	}
}
