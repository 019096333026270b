package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/messages"
)

// proxyFlags are kvrouter serve's OpenAI proxy options.
type proxyFlags struct {
	listen                *string
	connect, header, idle *time.Duration
	attempts              *int
	shedAbove             *uint64
	disaggProtocol        *string
	onPrefillFailure      *string
	prefillRetries        *int
}

func addProxyFlags(fs *flag.FlagSet) *proxyFlags {
	return &proxyFlags{
		listen:    fs.String("proxy-listen", "", "serve the OpenAI-compatible proxy (POST /v1/completions, /v1/chat/completions, GET /v1/models) on HOST:PORT; a bare :PORT binds loopback (off when not given)"),
		connect:   fs.Duration("proxy-connect-timeout", 2*time.Second, "proxy: deadline to connect to an engine; past it the next-best worker is tried"),
		header:    fs.Duration("proxy-header-timeout", 5*time.Minute, "proxy: deadline for an engine's response headers"),
		idle:      fs.Duration("proxy-idle-timeout", 5*time.Minute, "proxy: end an answer whose engine sent nothing for this long"),
		attempts:  fs.Int("proxy-attempts", 3, "proxy: workers tried per request when connections fail (the chosen one and the next best)"),
		shedAbove: fs.Uint64("proxy-shed-above-blocks", 0, "proxy: answer 429 when every worker already has more than this many KV blocks booked (0: never shed)"),
		disaggProtocol: fs.String("proxy-disagg-protocol", proxy.ProtocolAuto, "proxy: KV transfer protocol of requests the router splits into prefill and decode legs: "+
			"auto (the prefill worker's engine: registered, or detected from its KV events; until one is known the decode worker prefills), vllm, sglang or trtllm"),
		onPrefillFailure: fs.String("proxy-on-prefill-failure", proxy.PrefillFallbackLocal, "proxy: when a split request's prefill leg fails before the client got a byte: "+
			"fallback-local (the decode worker prefills itself; vLLM, TensorRT-LLM) or fail (502); SGLang always fails"),
		prefillRetries: fs.Int("proxy-prefill-retries", proxy.MaxPrefillRetries, "proxy: 0 or 1: times a split request's prefill leg is sent again, to the route answer's alternate prefill worker "+
			"(the runner-up on another worker; the prefill booking moves there), when it failed before the client got a byte: unreachable, 5xx, broken off, "+
			"no transfer params; SGLang re-sends both legs with a fresh room. Not on a 4xx, without an alternate, past the retry budget (--retry-budget) "+
			"or once the client left; then --proxy-on-prefill-failure applies"),
	}
}

// check refuses proxy flags that cannot work, at start.
func (f *proxyFlags) check() error {
	if r := *f.prefillRetries; r < 0 || r > proxy.MaxPrefillRetries {
		return fmt.Errorf("--proxy-prefill-retries %d: want 0 or %d (a route answer names one alternate prefill worker)", r, proxy.MaxPrefillRetries)
	}
	return nil
}

// disagg is the proxy's split-request options, engines naming each
// worker's engine.
func (f *proxyFlags) disagg(engines func(messages.WorkerID) string) proxy.DisaggOptions {
	return proxy.DisaggOptions{Protocol: *f.disaggProtocol, Engines: engines, OnPrefillFailure: *f.onPrefillFailure, PrefillRetries: *f.prefillRetries}
}

// path is the request path the front ends share (nil without a front end).
func (f *proxyFlags) path(svc *service.Service, gate *admission.Gate, grd *requestpath.Guard, logger *slog.Logger) *requestpath.Path {
	if *f.listen == "" {
		return nil
	}
	return requestpath.New(svc, requestpath.Config{ShedAboveBlocks: *f.shedAbove, MaxCandidates: max(*f.attempts, 1), Logger: logger,
		Admission: gate, Guard: grd, Metrics: &requestpath.Metrics{Front: "proxy"}})
}

// server is the proxy's HTTP server (nil when --proxy-listen is not given).
func (f *proxyFlags) server(path *requestpath.Path, host *service.Host, token string, prompts proxy.Prompts, logger *slog.Logger) (*http.Server, error) {
	if path == nil {
		return nil, nil
	}
	addr := *f.listen
	if h, port, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--proxy-listen %q: want HOST:PORT: %v", addr, err)
	} else if h == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	p, err := proxy.New(path, proxy.Options{APIToken: token, Prompts: prompts, ConnectTimeout: *f.connect, HeaderTimeout: *f.header,
		IdleTimeout: *f.idle, Attempts: *f.attempts, Meter: host.Metrics().Meter("github.com/kvrouter/kvrouter/actors/frontend/proxy"), Logger: logger,
		Disagg: f.disagg(host.Service.EngineOf)})
	if err != nil {
		return nil, err
	}
	return proxy.NewServer(addr, p, logger), nil
}
