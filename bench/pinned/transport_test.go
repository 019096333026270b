package pinned

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The lean transport sends the method, path, headers and body a server
// sees as any client's, reads the status, and reuses its connections: 64
// concurrent clients of 50 requests each open at most 64 connections.
func TestLeanTransportKeepsConnectionsAlive(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/route" || r.Header.Get("Content-Type") != "application/json" || r.ContentLength != int64(len(b)) {
			http.Error(w, "bad request shape", http.StatusTeapot)
			return
		}
		if bytes.Contains(b, []byte("busy")) {
			http.Error(w, `{"error":"busy"}`, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(append([]byte(`{"echo":`), b...))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := newLeanTransport(10 * time.Second)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	var bad atomic.Int32
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				body, want := `{"n":1}`, http.StatusOK
				if (g+i)%7 == 0 {
					body, want = `{"busy":1}`, http.StatusServiceUnavailable
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/route", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil || resp.StatusCode != want {
					bad.Add(1)
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d of 3,200 requests failed or got the wrong status", bad.Load())
	}
	if n := conns.Load(); n < 1 || n > 64 {
		t.Errorf("%d connections for 64 concurrent clients", n)
	}
}

// An answer the transport cannot frame (no Content-Length) is an error and
// its connection is dropped; a Connection: close answer is read and its
// connection not reused; a server that does not answer in time is a
// timeout.
func TestLeanTransportFailures(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			_, _ = w.Write([]byte("part"))
			w.(http.Flusher).Flush()
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = w.Write([]byte("bye"))
		case "/slow":
			<-r.Context().Done()
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := newLeanTransport(0)
	defer tr.CloseIdleConnections()
	get := func(path string, timeout time.Duration) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		return tr.RoundTrip(req)
	}
	if _, err := get("/chunked", 10*time.Second); err == nil || !strings.Contains(err.Error(), "without Content-Length") {
		t.Errorf("chunked answer: %v", err)
	}
	for range 2 {
		if resp, err := get("/close", 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("close: %v %v", resp, err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections after a dropped one and two closed by the server, want 3", n)
	}
	c := &http.Client{Transport: newLeanTransport(50 * time.Millisecond)}
	if _, err := c.Get(srv.URL + "/slow"); err == nil || errorClass(0, err.Error()) != "timeout" {
		t.Errorf("slow server: %v", err)
	}
}
