package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/admission"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/frontend/picker"
	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/engine"
)

const serveHelp = `Usage: kvrouter serve [flags]

Runs the router: listeners on every registered engine's KV events, the
prefix index per (model, tenant), and the HTTP API — Dynamo's standalone
indexer endpoints (POST /register, /unregister, /query, /query_by_hash,
GET /workers, /dump) plus kvrouter's POST /route,
/route/{request_id}/prefill_done, /route/{request_id}/free,
GET and DELETE /sessions/{session_id}, GET /healthz, /readyz, /metrics.

Sessions: engines report a session id on stored blocks; kvrouter keeps each
session's lineage per worker (bounded by --max-sessions, dropped after
--session-idle without a store). A /route request with that session_id
gives the worker holding the session's newest blocks up to --session-credit
× their depth more overlap blocks (never past the request's length): the
physical overlap stays the primary signal, and a session with no lineage
routes as without one.

Predictions: a routed request's blocks count as held by its worker for
--predict-ttl, until the engine's events confirm them (a BlockRemoved or
AllBlocksCleared ends a prediction at once), so siblings of one prompt that
arrive before its events land together; /route says how many of the
overlap blocks were predicted (predicted_blocks). Predicted blocks that
requests routed there still wait to prefill earn no credit when an idle
worker (no request in flight) prefilling the whole request would reach its
first token sooner by more than the recompute's share of the idle workers
(--predict-wait-check, on by default; counted in
kvrouter_predicted_wait_withheld_total), so a large fleet spreads a burst
over its idle workers instead of queueing it behind one prefill, and a
busy one keeps it together. With --predict-wait-falloff F (off by default)
they also earn less credit the more requests wait and the more workers are
idle. A worker registered with
"events":"none" (and no endpoint) publishes no events: it is routed from an
approximate cache of what the router sent it, of its registration's
cache_blocks (default --eventless-cache-blocks), LRU-evicted, each block
dropped --eventless-ttl after its last request; /workers shows it in mode
"predictions", state "approximate".

Workers are registered over HTTP (POST /register), in a file of /register
bodies (--workers-file), or given as flags:
  --worker ID[:RANK]=ENDPOINT[,replay=ENDPOINT][,serving=HOST:PORT]
      [,role=prefill|decode|both][,bootstrap=[HOST:]PORT]
      [,topic=PREFIX][,bind][,by-topic,pod=POD]
      (repeatable; model --model, tenant --tenant)
  With bind kvrouter binds ENDPOINT and the engine dials it; topic=
  filters by prefix. With by-topic,pod=POD several workers share one
  socket (each --worker naming the same ENDPOINT, its own pod): the
  engines publish on it with the topic kv@<pod>@<model> (llm-d and vLLM:
  kv@<pod IP>:<port>@<model>), and a message goes to the worker whose
  pod its topic names (a pod no --worker names is refused and counted).
  Such a pod has no replay; not with --cluster.

OpenAI proxy: --proxy-listen HOST:PORT serves POST /v1/completions,
/v1/chat/completions and GET /v1/models. Each request is routed, its body
forwarded untouched to the chosen rank's serving endpoint (ranks without
one are skipped), the answer streamed back chunk by chunk; prefill_done
and free follow the answer (first byte, end), so clients never call them.
A connection that fails is retried on the next-best worker
(--proxy-attempts); --proxy-shed-above-blocks answers 429 when every worker is
loaded past it. The API token applies to the proxy too. Answers carry
x-request-id (the client's or a new one) and x-kvrouter-worker
(WORKER:DP_RANK).

A router started late can warm up from a running one: --bootstrap-from
http://peer:8090 loads the peer's index (GET /dump) and registers its
engine streams, each resuming where the dump stands — nothing is dropped
when the engine's replay buffer still holds what followed; otherwise the
stream resyncs and is flagged degraded, as any stream would.

Prompt token ids: --tokenizer MODEL=PATH loads a model's tokenizer.json, so
completion text is tokenized locally; otherwise (and always for chat, whose
template only the engine applies) the prompt goes to the engine's
/tokenize or render endpoint at the rank's serving endpoint, bounded by
--tokenize-timeout (past it: route by load). A parity guard tokenizes a
probe set both ways, and reads the engine's block size, when an engine
appears and every --parity-interval: a disagreement is logged, counted
(kvrouter_tokenizer_parity_mismatch, kvrouter_engine_block_size_mismatch)
and shown in /workers, and the engine's ids win.

With --epp-listen HOST:PORT (:PORT binds loopback) serve is also an Envoy
ext_proc endpoint picker, as the Gateway API Inference Extension's
protocol defines it: Envoy streams each request to it over gRPC, the
picker answers with the chosen rank's serving endpoint in the
x-gateway-destination-endpoint header and dynamic metadata, and books the
request from the response (served endpoint, first byte, end or reset), so
nobody calls prefill_done or free. The port serves TLS (ALPN h2) as the
InferencePool gateways dial it: a certificate from --epp-cert-dir
(tls.crt, tls.key; re-read when they change), else a self-signed one made
in memory; --epp-client-ca requires client certificates;
--epp-secure-serving=false serves plaintext h2c. gRPC health services
"", liveness, readiness, inference-extension and
envoy.service.ext_proc.v3.ExternalProcessor, in plaintext on
--epp-health-listen (default port 9003: kubelet's gRPC probes) and on the
ext_proc port.

Overload: with --max-inflight-routes N at most N route requests are worked
on at once (POST /route, the proxy and the picker together); one more is
answered at once, 503 overloaded with Retry-After on /route, 429 on the
proxy and picker. Before that, the edge takes or refuses POST /route,
/select_and_reserve and the proxy's POSTs from their headers, before their
bodies are read: past --edge-max-inflight requests in flight (default 512
a core) or --edge-max-inflight-bytes of declared bodies (default 256 MiB),
or while the --max-inflight-routes cap is full, one is answered 503
overloaded (429 on the proxy) with Retry-After; a Content-Length over the
body cap is answered 413 unread; a request arriving with nothing in flight
is always taken (kvrouter_edge_refused_total{endpoint,reason}). A route
request an index shard or the route actor takes
after its --timeout has passed is answered 503 timeout without the work
(kvrouter_route_expired_total). Profiles: --pprof-listen 127.0.0.1:PORT.

The API token (mutating endpoints and /route need "Authorization: Bearer
TOKEN" when set) comes from --api-token-file, or the KVROUTER_API_TOKEN
environment variable; --api-token exists for tests (a flag shows in ps).
The read endpoints (and /metrics and the fleet page) stay open unless
--protect-reads; /healthz and /readyz are always open.

TLS: the HTTP API and the proxy are plaintext unless --http-cert-dir or
--proxy-cert-dir names a directory with tls.crt and tls.key (a mounted
Kubernetes TLS Secret): its certificate is checked at start and re-read
every --tls-check-every (a broken update is logged and counted, the old
certificate kept). --tls-min-version and --tls-cipher-suites apply to
every TLS listener. Peers and --bootstrap-from then need https:// URLs
with a certificate their system trusts.
` + drainHelp + signalsHelp + discoverHelp + disaggHelp + `
Example:
  kvrouter serve --block-size 16 --worker 1=tcp://10.0.0.5:5557,replay=tcp://10.0.0.5:5558
  curl -s localhost:8090/route -H 'Content-Type: application/json' \
       -d '{"token_ids":[1,2,3],"model_name":"default"}'

Flags:
`

// runServe is `kvrouter serve`: it runs until SIGINT or SIGTERM.
func runServe(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return serve(args, stdout, stderr, processSignals)
}

// stopSignals gives serve the channel that tells it to drain and stop,
// and the function that releases it.
type stopSignals func() (<-chan os.Signal, func())

// processSignals is the process's SIGINT and SIGTERM. Tests that run serve
// in process pass their own channel instead: a signal goes to the whole
// process, and one sent by an earlier test could reach a later serve.
func processSignals() (<-chan os.Signal, func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return sigs, func() { signal.Stop(sigs) }
}

// serve is runServe, stopped by what stop gives.
func serve(args []string, stdout, stderr io.Writer, stop stopSignals) int {
	fs := cli.NewFlags("kvrouter serve", serveHelp, stderr)
	addr := fs.String("http", "127.0.0.1:8090", "HTTP listen address (loopback by default)")
	blockSize := fs.Int("block-size", 16, "tokens per block for workers registered without one")
	engineName := fs.String("engine", engine.Auto, "engine of registrations that name none (/register's engine, --worker's engine=, the workers file, the kvrouter.io/engine label): "+strings.Join(engine.Choices(), ", ")+"; auto decides per stream from what its batches show (GET /workers says what and why)")
	var workers workerFlags
	fs.Var(&workers, "worker", "engine endpoint ID[:RANK]=ENDPOINT[,replay=EP][,serving=HOST:PORT][,engine=NAME][,role=ROLE][,bootstrap=[HOST:]PORT][,topic=PREFIX][,bind][,by-topic,pod=POD] to register at start (repeatable; serving= is where the proxy sends the rank's requests, http(s):// allowed; engine= as --engine; role= prefill, decode or both (the default) in a disaggregated fleet, see --disagg; bootstrap= an SGLang prefill engine's KV transfer bootstrap port, on the serving host unless HOST: is given; topic=PREFIX, bind, and by-topic,pod=POD for a socket several workers share, see above)")
	model := fs.String("model", "default", "model name of --worker workers")
	tenant := fs.String("tenant", api.DefaultTenant, "tenant of --worker workers")
	costName := fs.String("cost", routing.CostKVRouter.String(), "routing cost: kvrouter (weight × the request's uncached blocks + queued prefill blocks + decode blocks) or dynamo (the reference's: weight × (queued + uncached) prefill blocks + decode blocks)")
	tiers := fs.String("tier-weights", service.DefaultTierWeights.String(), "share of a cached block's worth the routing cost credits by the storage tier holding it (TIER=WEIGHT in [0, 1], comma-separated; tiers not named keep these defaults); /route reports the physical overlap")
	weight := fs.Float64("overlap-weight", routing.DefaultOverlapWeight, "weight of the request's uncached prefill blocks in the routing cost (0: load only; default 16 with --cost kvrouter, 1 with --cost dynamo)")
	falloff := fs.Float64("cache-falloff", routing.DefaultCacheFalloff, "with --cost kvrouter: how fast a busy worker's cache credit falls (a worker tracking r× the mean requests keeps 1/(1 + falloff × (r − 1)²) of it; 0: off)")
	temperature := fs.Float64("temperature", 0, "routing temperature (0: deterministic argmin)")
	timeout := fs.Duration("timeout", 50*time.Millisecond, "deadline of one actor request on the route path (an index query gets 1µs more per block of its prompt)")
	maxPrompt := fs.Int("max-prompt-tokens", httpapi.DefaultMaxPromptTokens, "largest token_ids of one /route or /query request (413 too_many_tokens past it); the request body cap follows from it (12 bytes a token + 64 KiB: 12.1 MiB at the default)")
	maxSessions := fs.Int("max-sessions", sessions.DefaultMaxSessions, fmt.Sprintf("sessions whose lineage is kept per (model, tenant), at most %d (a stream's lineage ids fit 20 bits); the least recently stored is evicted", sessions.MaxSessionsCap))
	sessionCredit := fs.Float64("session-credit", 1, "weight of a /route session_id's lineage: extra overlap blocks = weight × the session's newest chain depth (0: off)")
	sessionIdle := fs.Duration("session-idle", sessions.DefaultIdleTTL, "drop a session's lineage after this long without a store")
	tokenFlag := fs.String("api-token", "", "bearer token for mutating endpoints (prefer KVROUTER_API_TOKEN or --api-token-file)")
	tokenFile := fs.String("api-token-file", "", "file holding the bearer token")
	protectReads := fs.Bool("protect-reads", false, "require the API token on the read endpoints too (/workers, /query, /dump, /sessions, /loads, /decisions, /metrics, the fleet page /ui); /healthz and /readyz stay open for probes")
	shards := fs.Int("shards", 1, "index shard actors per (model, tenant), 1-64: more parallel ingest for a little more route latency")
	var st service.Startup
	cf := addClusterFlags(fs)
	df := addDiscoverFlags(fs)
	fs.StringVar(&st.BootstrapFrom, "bootstrap-from", "", "warm up from a peer router (http://host:port): load its GET /dump and follow its streams from where the dump stands")
	fs.StringVar(&st.WorkersFile, "workers-file", "", "JSON file of workers to register at start: an array of POST /register bodies")
	var tokenizers tokenizerFlags
	fs.Var(&tokenizers, "tokenizer", "local tokenizer of a model: MODEL=PATH, or PATH for the --model model (repeatable); a Hugging Face tokenizer.json, plain or gzipped, byte-level BPE (Llama-3, Qwen, gpt-oss). Completion text is then tokenized here; chat always goes to the engine")
	tokenizeTimeout := fs.Duration("tokenize-timeout", prompttokens.DefaultTimeout, "deadline of the engine's tokenize/render round trips for one prompt; past it the request routes by load (counted)")
	pf := addProxyFlags(fs)
	sf := addSignalsFlags(fs)
	dgf := addDisaggFlags(fs)
	parityEvery := fs.Duration("parity-interval", 5*time.Minute, "how often the local tokenizers and registered block sizes are checked against the engines (also when an engine appears)")
	epp := addEPPFlags(fs)
	tlsf := addTLSFlags(fs)
	drainTimeout := addDrainFlags(fs)
	gf := addGuardFlags(fs)
	ef := addEdgeFlags(fs)
	maxRoutes := fs.Int("max-inflight-routes", 0, "route requests worked on at once at most (POST /route, proxy and picker together); past it a request is answered at once: 503 overloaded with Retry-After on /route, 429 on the proxy and picker (0, the default: no cap; package admission says why)")
	predict := addPredictFlags(fs)
	pprofAddr := fs.String("pprof-listen", "", "serve Go's profiles (net/http/pprof, /debug/pprof/) on HOST:PORT, a listener of their own without the API token: use loopback (a bare :PORT binds it); off when not given")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	token, err := apiToken(*tokenFlag, *tokenFile)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if *protectReads && token == "" {
		fmt.Fprintln(stderr, "kvrouter serve: --protect-reads needs an API token (KVROUTER_API_TOKEN, --api-token-file or --api-token)")
		return 2
	}
	policy, err := tlsf.policy()
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if *drainTimeout < 0 {
		fmt.Fprintf(stderr, "kvrouter serve: --drain-timeout %s: want 0 or more\n", *drainTimeout)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	stopTracing, ok := startTracing("serve", stderr)
	if !ok {
		return 2
	}
	defer stopTracing()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	cost, err := routing.ParseCost(*costName)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: --cost: %v\n", err)
		return 2
	}
	rc := routing.CostConfig(cost)
	if cli.FlagSet(fs, "overlap-weight") {
		rc.OverlapWeight = *weight
	}
	if cli.FlagSet(fs, "cache-falloff") {
		rc.CacheFalloff = *falloff
	}
	rc.Temperature = *temperature
	tw, err := service.ParseTierWeights(*tiers)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: --tier-weights: %v\n", err)
		return 2
	}
	if rc.Disagg, err = dgf.config(); err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if err := pf.check(); err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if *maxSessions <= 0 || *sessionIdle <= 0 {
		fmt.Fprintf(stderr, "kvrouter serve: --max-sessions and --session-idle must be positive\n")
		return 2
	}
	if *maxSessions > sessions.MaxSessionsCap {
		fmt.Fprintf(stderr, "kvrouter serve: --max-sessions %d: at most %d (a stream's lineage ids fit 20 bits)\n", *maxSessions, sessions.MaxSessionsCap)
		return 2
	}
	if *maxPrompt <= 0 {
		fmt.Fprintf(stderr, "kvrouter serve: --max-prompt-tokens %d: must be positive\n", *maxPrompt)
		return 2
	}
	if *maxRoutes < 0 {
		fmt.Fprintf(stderr, "kvrouter serve: --max-inflight-routes %d: want 0 (no cap) or more\n", *maxRoutes)
		return 2
	}
	gate := admission.New(*maxRoutes, logger)
	edge, err := ef.build(gate, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	grd, err := gf.build(df.pool, df.mode)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if *shards < 1 || *shards > 64 {
		fmt.Fprintf(stderr, "kvrouter serve: --shards %d: want 1 to 64\n", *shards)
		return 2
	}
	predictions, err := predict.config()
	if err == nil {
		err = predict.routing(fs, &rc)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	pc := pipeline.Config{Index: indexer.Config{Shards: *shards},
		Sessions: sessions.ActorConfig{Index: sessions.Config{MaxSessions: *maxSessions, IdleTTL: *sessionIdle}}}
	cc, err := cf.config()
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	clusterSrc, err := clusterTLS(cc, cf.tlsDir, policy, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	dc, err := df.config(*blockSize, *engineName, *model)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if dc != nil {
		if dc.Pods, dc.Dynamic, err = df.clients(dc.Namespace, dc.Pool != ""); err != nil {
			fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
			return 2
		}
	}
	st.Token = token
	if st.Workers, err = registrations(workers, *model, *tenant); err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	signals, err := sf.config()
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	host, err := service.StartHost(system, service.HostConfig{Cluster: cc, Startup: st, Logger: logger,
		Service: service.Config{BlockSize: *blockSize, Engine: *engineName, Routing: rc, TierWeights: &tw, Timeout: *timeout,
			Pipeline: pc, SessionCredit: *sessionCredit, Predictions: predictions, Signals: signals}})
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	defer host.Leave() // after Close: the member leaves the cluster last
	defer host.Close()
	pr, err := newPrompts(tokenizers, *model, *tokenizeTimeout, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	grd.ShareTrips(host.Service.ShareBreakerTrips(grd.RemoteTrip)) // a breaker opened on one host opens on all
	more := append(pr.metrics(), gate.WriteMetrics, grd.WriteMetrics, host.Service.WritePredictionMetrics)
	if dc != nil {
		disc, err := startDiscovery(*dc, host.Service, logger)
		if err != nil {
			fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
			return 2
		}
		defer disc.Stop() // before Close: no write reaches a stopped service
		more = append(more, disc.WriteMetrics)
	}
	var epps *picker.Server
	var eppPath *requestpath.Path
	if epp.enabled() {
		var m []func(io.Writer) error
		if epps, eppPath, m, err = epp.build(host.Service, *model, int(httpapi.BodyBytesFor(*maxPrompt, 0)), policy, pr.resolver, gate, grd, logger); err != nil {
			fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
			return 2
		}
		more = append(more, m...)
	}
	var tlsSrcs tlsSources
	tlsSrcs.add(epp.src)
	tlsSrcs.add(clusterSrc)
	httpSrc, err := tlsSrcs.serverTLS("http", "--http-cert-dir", tlsf.httpDir, policy, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	proxySrc, err := tlsSrcs.serverTLS("proxy", "--proxy-cert-dir", tlsf.proxyDir, policy, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	if proxySrc != nil && *pf.listen == "" {
		fmt.Fprintf(stderr, "kvrouter serve: --proxy-cert-dir needs --proxy-listen\n")
		return 2
	}
	more = append(more, tlsSrcs.WriteMetrics, edge.WriteMetrics)
	rp := pf.path(host.Service, gate, grd, logger)
	if rp != nil {
		more = append(more, rp.WriteMetrics)
	}
	h, err := host.Handler(httpapi.Options{APIToken: token, ProtectReads: *protectReads, Logger: logger, RankWarnings: pr.rankWarnings, RankBreaker: grd.RankBreaker, RankHealth: grd.RankHealth, MaxTokens: *maxPrompt,
		Admission: gate, Edge: edge}, more...)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	psrv, err := pf.server(rp, host, token, pr.resolver, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
		return 2
	}
	srv := httpapi.NewServer(*addr, h, httpapi.Options{})
	sigs, release := stop()
	defer release()
	ctx, stopRun := context.WithCancel(context.Background()) // ends at the stop, after the drain
	defer stopRun()
	stp := &stopper{logger: logger, svc: host.Service, picker: epps, stopEPP: stopRun, paths: []*requestpath.Path{eppPath, rp}}
	stp.track(srv)
	errc := make(chan error, 2)
	tlsSrcs.watch(ctx, tlsf.checkEvery)
	go func() { errc <- listen(srv, httpSrc, policy) }()
	if psrv != nil {
		psrv.Handler = edgeProxy(edge, psrv.Handler)
		stp.track(psrv)
		go func() { errc <- listen(psrv, proxySrc, policy) }()
		logger.Info("kvrouter proxy listening", "proxy", psrv.Addr, "tls", proxySrc != nil)
	}
	if *pprofAddr != "" {
		ps, ln, err := pprofServer(*pprofAddr, logger)
		if err != nil {
			fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
			return 2
		}
		defer ps.Close()
		go func() { _ = ps.Serve(ln) }()
		logger.Info("pprof listening", "pprof", ln.Addr().String())
	}
	go pr.run(ctx, host.Service, 2*time.Second, *parityEvery)
	go gf.run(ctx, grd, host.Service, dc, logger)
	var eppErr <-chan error
	if epps != nil {
		at, err := epp.start(ctx, epps)
		if err != nil {
			fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
			return 2
		}
		stp.epp, eppErr = at, at.errs
		logger.Info("endpoint picker listening", "grpc", at.extProc, "health", at.health, "tls", epp.src != nil, "fallbacks", epp.fallbacks)
	}
	logger.Info("kvrouter serve listening", "http", *addr, "tls", httpSrc != nil, "workers", len(workers), "auth", token != "")
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "kvrouter serve: %v\n", err)
			return 1
		}
	case err := <-eppErr:
		fmt.Fprintf(stderr, "kvrouter serve: endpoint picker: %v\n", err)
		return 1
	case sig := <-sigs:
		stp.drain(sig, *drainTimeout, sigs, eppErr)
	}
	return 0
}

// apiToken reads the token from a file, the environment or the flag, in
// that order of preference; it is never logged.
func apiToken(flagValue, file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading --api-token-file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if env := os.Getenv("KVROUTER_API_TOKEN"); env != "" {
		return env, nil
	}
	return flagValue, nil
}
