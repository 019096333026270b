package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// --pprof-listen serves the profiles on a listener of its own (a bare
// :PORT on loopback), and refuses an address without a port.
func TestPprofServer(t *testing.T) {
	srv, ln, err := pprofServer(":0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() { _ = srv.Serve(ln) }()
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); host != "127.0.0.1" {
		t.Errorf("a bare :PORT listens on %s, want loopback", ln.Addr())
	}
	c := http.Client{Timeout: time.Minute}
	resp, err := c.Get("http://" + ln.Addr().String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(b) == 0 {
		t.Errorf("/debug/pprof/cmdline: %d %q", resp.StatusCode, b)
	}
	if _, _, err := pprofServer("localhost", nil); err == nil || !strings.Contains(err.Error(), "--pprof-listen") {
		t.Errorf("an address without a port: %v", err)
	}
}
