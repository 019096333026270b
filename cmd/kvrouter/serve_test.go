package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/messages/eventually"
)

// TestServeRefusesMaxSessionsPastItsCap: a --max-sessions the session
// index cannot hold is refused at flag parsing with its cap, never lowered
// silently; --help names the cap.
func TestServeRefusesMaxSessionsPastItsCap(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--max-sessions", "1048577"}, nil, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "--max-sessions 1048577: at most 1048576") {
		t.Errorf("--max-sessions 1048577: exit %d, stderr:\n%s", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "at most 1048576") {
		t.Errorf("serve --help: exit %d, no cap named for --max-sessions:\n%s", code, out.String())
	}
}

// TestServeProtectReads: with --protect-reads the read endpoints, /metrics
// and the fleet page answer 401 without the API token and 200 with it,
// while /healthz stays open for probes; without a token the flag is
// refused.
func TestServeProtectReads(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--protect-reads"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--protect-reads needs an API token") {
		t.Errorf("--protect-reads without a token: exit %d, stderr:\n%s", code, errb.String())
	}
	api := "127.0.0.1:" + freePort(t)
	serveInProcess(t, "--http", api, "--api-token", "s3cret", "--protect-reads")
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+api+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually.True(t, "serve answers /healthz without a token", func() (bool, string) {
		code := get("/healthz", "")
		return code == http.StatusOK, fmt.Sprint(code)
	})
	for _, path := range []string{"/workers", "/metrics", "/ui", "/decisions"} {
		if code := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code := get(path, "s3cret"); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", path, code)
		}
	}
}

// TestServeRefusesBadTierWeights: a weight outside [0, 1] or an unknown
// tier stops serve at flag parsing, naming the flag.
func TestServeRefusesBadTierWeights(t *testing.T) {
	for _, bad := range []string{"host=1.5", "gpu=1"} {
		var out, errb bytes.Buffer
		if code := run([]string{"serve", "--tier-weights", bad}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--tier-weights") {
			t.Errorf("--tier-weights %s: exit %d, stderr:\n%s", bad, code, errb.String())
		}
	}
}
