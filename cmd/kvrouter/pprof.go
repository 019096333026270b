package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofServer serves net/http/pprof's profiles (/debug/pprof/…) for
// serve --pprof-listen, on a listener and a mux of its own: never on the
// API's port, never behind its token, so it is meant for loopback. (The
// package's import also registers them on http.DefaultServeMux, which
// nothing in kvrouter serves.) A bare :PORT binds loopback.
func pprofServer(addr string, logger *slog.Logger) (*http.Server, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--pprof-listen %q: want HOST:PORT or :PORT: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, nil, fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No write timeout: a CPU profile or trace answers after its ?seconds=.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	return srv, ln, nil
}
