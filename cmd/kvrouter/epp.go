package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"github.com/kvrouter/kvrouter/actors/certs"
	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/actors/frontend/picker"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/service"
)

// eppFlags are kvrouter serve's endpoint picker flags: with --epp-listen
// set, serve also runs the Envoy ext_proc endpoint picker (package
// actors/frontend/picker) over the same router.
type eppFlags struct {
	listen    string
	fallbacks int
	shed      uint64
	bodyMode  string
	maxBody   int
	serving   *eppServingFlags
	// src is the ext_proc listener's certificate (nil: h2c), after build;
	// serve reloads it with its other certificates.
	src *certs.Source
}

// enabled reports whether serve runs the picker.
func (f *eppFlags) enabled() bool { return f.listen != "" }

// addEPPFlags registers the picker's flags on serve's flag set.
func addEPPFlags(fs *flag.FlagSet) *eppFlags {
	f := &eppFlags{}
	fs.StringVar(&f.listen, "epp-listen", "", "serve the Envoy ext_proc endpoint picker (Gateway API Inference Extension protocol, gRPC; TLS unless --epp-secure-serving=false) on HOST:PORT; :PORT binds loopback (empty: off)")
	fs.IntVar(&f.fallbacks, "epp-fallbacks", 0, "next-best endpoints the picker adds to its answer, comma-separated, for a data plane that retries down the list (Envoy's ORIGINAL_DST cluster reads one address: keep 0 there)")
	fs.Uint64Var(&f.shed, "epp-shed-above-blocks", 0, "answer 429 when every eligible worker already has more than this many KV blocks booked by requests in flight (0: never shed)")
	fs.StringVar(&f.bodyMode, "epp-body-mode", "full-duplex", "body modes the picker assumes when Envoy does not send its protocol_config (older Envoys): full-duplex (FULL_DUPLEX_STREAMED both ways, as llm-d) or buffered (BUFFERED requests, STREAMED responses, as AIBrix)")
	fs.IntVar(&f.maxBody, "epp-max-body", 0, "largest request body the picker reads, in bytes (413 past it; 0: what --max-prompt-tokens token ids take, as /route)")
	f.serving = addEPPServingFlags(fs)
	return f
}

// build checks the flags and assembles the picker over svc, through its
// own request path (front "epp" in the metrics); more are its metrics.
// bodyCap is the body bound when --epp-max-body is 0; tp is the TLS policy.
func (f *eppFlags) build(svc *service.Service, model string, bodyCap int, tp certs.Policy, tk picker.Tokenizer, gate *admission.Gate, grd *requestpath.Guard, logger *slog.Logger) (s *picker.Server, path *requestpath.Path, more []func(io.Writer) error, err error) {
	var modes picker.Modes
	switch f.bodyMode {
	case "full-duplex":
		modes = picker.Modes{Request: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, Response: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED}
	case "buffered":
		modes = picker.Modes{Request: filterv3.ProcessingMode_BUFFERED, Response: filterv3.ProcessingMode_STREAMED}
	default:
		return nil, nil, nil, fmt.Errorf("--epp-body-mode %q: want full-duplex or buffered", f.bodyMode)
	}
	if f.fallbacks < 0 || f.fallbacks > 16 {
		return nil, nil, nil, fmt.Errorf("--epp-fallbacks %d: want 0 to 16", f.fallbacks)
	}
	switch {
	case f.maxBody < 0:
		return nil, nil, nil, fmt.Errorf("--epp-max-body %d: must be positive (0: follows --max-prompt-tokens)", f.maxBody)
	case f.maxBody == 0:
		f.maxBody = bodyCap
	}
	tc, src, err := f.serving.tlsConfig(tp, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	f.src = src
	path = requestpath.New(svc, requestpath.Config{ShedAboveBlocks: f.shed, MaxCandidates: f.fallbacks + 1,
		Admission: gate, Guard: grd, Logger: logger, Metrics: &requestpath.Metrics{Front: "epp"}})
	s = picker.New(picker.FromPath(path), picker.Config{
		Stream: picker.StreamConfig{Modes: modes, MaxBody: f.maxBody, MaxEndpoints: f.fallbacks + 1, DefaultModel: model,
			ConformanceHooks: f.serving.hooks},
		TLS: tc, Tokenizer: tk, Ready: func(ctx context.Context) error {
			if err := svc.Ready(ctx); err != nil {
				return err
			}
			return svc.Synced(ctx)
		}, Logger: logger,
	})
	return s, path, []func(io.Writer) error{s.WriteMetrics, path.WriteMetrics}, nil
}

// listenAddr is --epp-listen with loopback for a bare :PORT.
func (f *eppFlags) listenAddr() (string, error) {
	host, port, err := net.SplitHostPort(f.listen)
	if err != nil {
		return "", fmt.Errorf("--epp-listen %q: want HOST:PORT or :PORT: %v", f.listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// eppListening is where a started picker listens; errs carries what its
// ext_proc and health servers return (servers values in all: nil when
// stopped).
type eppListening struct {
	extProc, health string
	errs            <-chan error
	servers         int
}

// stopped waits until every server of the picker returned.
func (l eppListening) stopped() error {
	var first error
	for range l.servers {
		if err := <-l.errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// start listens (a busy port fails serve's start) and serves the picker
// and its health port until ctx ends (the certificate's reloads are
// serve's tlsSources').
func (f *eppFlags) start(ctx context.Context, s *picker.Server) (eppListening, error) {
	addr, err := f.listenAddr()
	if err != nil {
		return eppListening{}, err
	}
	haddr, err := f.serving.healthAddr(addr)
	if err != nil {
		return eppListening{}, err
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return eppListening{}, fmt.Errorf("--epp-listen: %w", err)
	}
	var hlis net.Listener
	if haddr != "" {
		if hlis, err = net.Listen("tcp", haddr); err != nil {
			lis.Close()
			return eppListening{}, fmt.Errorf("--epp-health-listen: %w", err)
		}
	}
	at := eppListening{extProc: lis.Addr().String()}
	errs := make(chan error, 2)
	at.servers = 1
	go func() { errs <- s.Serve(ctx, lis) }()
	if hlis != nil {
		at.health, at.servers = hlis.Addr().String(), 2
		go func() { errs <- s.ServeHealth(ctx, hlis) }()
	}
	at.errs = errs
	return at, nil
}
