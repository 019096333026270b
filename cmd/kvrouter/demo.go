package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
	"github.com/kvrouter/kvrouter/actors/frontend/requestpath"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/actors/telemetry"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/bench/traces"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

const demoHelp = `Usage: kvrouter demo [flags]

Starts kvrouter (the full router: listeners, index, HTTP API and the
OpenAI proxy on loopback ports) and --engines simulated engines with an
OpenAI HTTP surface, then replays a slice of the Mooncake conversation
trace as a client would: --in-flight clients stream POST /v1/completions
through the proxy, which routes each request, forwards it to the engine it
chose and books its load until the answer ends — so the engines' caches,
and the KV events kvrouter learns from, evolve from real routing decisions.
It prints live progress and ends with kvrouter's prefix hit rate (the
cached tokens the engines report) next to random routing's on the same
requests (fresh engines of the same size), and the time to first token.

The engines prefill one request at a time at --prefill-tokens-per-second
(uncached tokens); a request's first token streams at its prefill's end
and its KV events are published --publish-interval later, as a real
engine publishes them, so kvrouter learns of a prompt only after its
prefill. The slice mixes in sibling bursts (--burst-size requests
sharing a fresh --burst-prefix-token prefix after every --burst-every
trace requests), sent back to back: they arrive before the first one's
events, and the demo reports how many siblings kvrouter kept on their
group's first one's engine, and their hit rate, with predict-on-route
on (--predict-ttl, as kvrouter serve's) or off (--predict-ttl 0).
While it runs, the fleet page (GET /ui: workers, route rate, predicted
hit rate, the latest routing decisions) is at the URL it prints first;
--hold keeps everything up after the run until interrupted, to look at it.
` + demoDisaggHelp + `
Flags:
`

func runDemo(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter demo", demoHelp, stderr)
	engines := fs.Int("engines", 4, "simulated engines (with --disagg-fleet: P + D)")
	pdFleetFlag := fs.String("disagg-fleet", "", "P:D: a disaggregated fleet of P prefill and D decode engines instead of --engines (see above)")
	pdProtocol := fs.String("disagg-protocol", "vllm", "with --disagg-fleet: the engines' transfer protocol, vllm, sglang or trtllm")
	requests := fs.Int("requests", 3000, "trace requests to replay")
	trace := fs.String("trace", defaultTrace, `Mooncake trace to replay: `+cli.TraceRefHelp+` ("-" reads stdin)`)
	blockSize := fs.Int("block-size", 16, "tokens per block (each trace hash_id becomes one block)")
	capacity := fs.Int("capacity", 8192, "cache capacity of each engine, in blocks")
	inFlight := fs.Int("in-flight", 32, "clients streaming at once (their load steers new requests elsewhere)")
	tokens := fs.Int("completion-tokens", 8, "tokens each simulated answer streams")
	interval := fs.Duration("token-interval", time.Millisecond, "pause between streamed tokens of a simulated answer")
	seed := fs.Uint64("seed", 1, "seed of the random baseline")
	hold := fs.Bool("hold", false, "after the run, keep the router, the engines and the fleet page up until interrupted")
	predictTTL := fs.Duration("predict-ttl", predicted.DefaultTTL,
		"predict-on-route, as kvrouter serve's: how long a routed request's blocks count as held before the engine's events confirm them (0: off, to see the bursts spread)")
	waitFalloff := fs.Float64("predict-wait-falloff", routing.DefaultPredictedWaitFalloff,
		"as kvrouter serve's: how fast predicted blocks lose credit while requests routed there still wait to prefill them (0, the default: no falloff)")
	waitCheck := fs.Bool("predict-wait-check", routing.DefaultPredictedWaitCheck,
		"as kvrouter serve's: predicted blocks that requests routed there still wait to prefill earn no credit when an idle engine would reach the first token sooner by more than the recompute's share of the idle engines (false: every sibling of a burst follows the first)")
	prefillRate := fs.Float64("prefill-tokens-per-second", 100000,
		"each engine's prefill rate in uncached tokens, one request at a time (faster than a GPU's so the demo ends in seconds; what matters is the prefill time against the siblings' gaps)")
	publish := fs.Duration("publish-interval", 20*time.Millisecond, "time from a prefill's end to the publish of its KV events (the engine step's batch)")
	var bursts demoBursts
	fs.IntVar(&bursts.every, "burst-every", 25, "a burst of siblings after every this many trace requests (0: none)")
	fs.IntVar(&bursts.size, "burst-size", 8, "requests per burst")
	fs.IntVar(&bursts.prefix, "burst-prefix", 4096, fmt.Sprintf("tokens of the prefix a burst's siblings share (each adds %d of its own)", burstSuffix))
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "kvrouter demo: %v\n", err); return 1 }
	pd, err := parseDemoPD(*pdFleetFlag, *pdProtocol)
	if err == nil {
		err = checkWaitFalloff(*waitFalloff)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kvrouter demo: %v\n", err)
		return 2
	}
	decodeEngines := *engines // the random baseline's
	if pd != nil {
		*engines, decodeEngines = pd.engines(), pd.decode
	}
	if *inFlight < 1 || *engines < 1 {
		return fail(fmt.Errorf("--in-flight and --engines must be positive"))
	}
	prefill := simengine.PrefillOptions{TokensPerSecond: *prefillRate, PublishInterval: *publish}
	switch {
	case *predictTTL < 0:
		return fail(fmt.Errorf("--predict-ttl %v: want 0 (off) or more", *predictTTL))
	case !(*prefillRate > 0) || *publish < 0:
		return fail(fmt.Errorf("--prefill-tokens-per-second must be positive and --publish-interval not negative"))
	}
	if err := bursts.check(); err != nil {
		return fail(err)
	}
	tracePrompts, err := loadPrompts(*trace, *requests, *blockSize, stdin)
	if err != nil {
		return fail(err)
	}
	prompts, groups := bursts.mix(tracePrompts, *seed)
	predictions, predictLabel := predicted.Config{TTL: *predictTTL}, fmt.Sprintf("predict-on-route on (--predict-ttl %v)", *predictTTL)
	if *predictTTL == 0 {
		predictions.TTL, predictLabel = predicted.Off, "predict-on-route off (--predict-ttl 0)"
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stopTracing, ok := startTracing("demo", stderr)
	if !ok {
		return 2
	}
	defer stopTracing()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	rc := routing.DefaultConfig()
	rc.PredictedWaitFalloff, rc.PredictedWaitCheck = *waitFalloff, *waitCheck
	if pd != nil {
		rc.Disagg = pd.routing()
	}
	if *waitFalloff > 0 {
		predictLabel += fmt.Sprintf(", --predict-wait-falloff %g", *waitFalloff)
	}
	if *waitCheck != routing.DefaultPredictedWaitCheck {
		predictLabel += fmt.Sprintf(", --predict-wait-check=%t", *waitCheck)
	}
	svc, err := service.New(system, service.Config{BlockSize: *blockSize, Routing: rc, Timeout: time.Second,
		Predictions: predictions})
	if err != nil {
		return fail(err)
	}
	defer svc.Close()
	metrics, err := telemetry.NewMetrics(svc, 0)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = metrics.Shutdown(context.Background()) }()
	apiSrv, err := serveLoopback(httpapi.NewServer("", svc.Handler(metrics, httpapi.Options{Logger: logger}), httpapi.Options{}))
	if err != nil {
		return fail(err)
	}
	defer apiSrv.close()
	fmt.Fprintf(stdout, "kvrouter demo: fleet page at %s/ui (API and /metrics at %s)\n", apiSrv.url, apiSrv.url)
	path := requestpath.New(svc, requestpath.Config{Logger: logger})
	po := proxy.Options{Logger: logger}
	if pd != nil {
		po.Disagg = pd.proxy(svc.EngineOf)
	}
	px, err := proxy.New(path, po)
	if err != nil {
		return fail(err)
	}
	front, err := serveLoopback(proxy.NewServer("", px, logger))
	if err != nil {
		return fail(err)
	}
	defer front.close()
	c := &demoClient{base: apiSrv.url, http: &http.Client{Timeout: 5 * time.Second}}

	fleet, err := newDemoFleet(*engines, *blockSize, *capacity, simengine.HTTPOptions{CompletionTokens: *tokens, TokenInterval: *interval,
		Prefill: &prefill}, pd)
	if err != nil {
		return fail(err)
	}
	defer fleet.close()
	for i, e := range fleet.engines {
		reg := map[string]any{"instance_id": i + 1, "endpoint": e.Endpoint(),
			"replay_endpoint": e.ReplayEndpoint(), "serving_endpoint": fleet.https[i].ServingEndpoint(),
			"model_name": "demo", "block_size": *blockSize}
		maps.Copy(reg, fleet.regs[i])
		if err := c.post("/register", reg, nil); err != nil {
			return fail(fmt.Errorf("register engine %d: %w", i+1, err))
		}
	}
	fmt.Fprintf(stdout, "kvrouter demo: %d simulated engines, %d requests of the %s trace, %d clients through the proxy at %s\n",
		*engines, len(tracePrompts), traces.Label(*trace), *inFlight, front.url)
	fmt.Fprintf(stdout, "kvrouter demo: %s; engines prefill %.0f tokens/s one request at a time, KV events %v after each prefill's end\n",
		predictLabel, *prefillRate, *publish)
	if len(groups) > 0 {
		fmt.Fprintf(stdout, "kvrouter demo: %d sibling bursts of %d requests sharing a %d-token prefix, one after every %d trace requests\n",
			len(groups), bursts.size, bursts.prefix, bursts.every)
	}

	routed, elapsed, err := streamThroughProxy(front.url, prompts, *inFlight, stdout)
	if err != nil {
		return fail(err)
	}
	rng := rand.New(rand.NewPCG(*seed, 2))
	random, err := replayOffline(prompts, decodeEngines, *blockSize, *capacity, func(n int) int { return rng.IntN(n) })
	if err != nil {
		return fail(err)
	}
	bound, err := replayOffline(prompts, 1, *blockSize, 1<<30, func(int) int { return 0 })
	if err != nil {
		return fail(err)
	}
	slices.Sort(routed.ttft)
	fmt.Fprintf(stdout, "\n%d requests in %.1f s (%.0f requests/s streamed through the proxy by %d clients; time to first token p50 %v, p99 %v)\n",
		len(prompts), elapsed.Seconds(), float64(len(prompts))/elapsed.Seconds(), *inFlight,
		routed.ttft[len(routed.ttft)/2].Round(time.Microsecond), routed.ttft[len(routed.ttft)*99/100].Round(time.Microsecond))
	fmt.Fprintf(stdout, "prefix hit rate (cached prompt tokens / prompt tokens):\n")
	fmt.Fprintf(stdout, "  kvrouter  %5.1f%%   requests per engine %v\n", 100*routed.hitRate(), routed.perEngine)
	fmt.Fprintf(stdout, "  random    %5.1f%%   requests per engine %v\n", 100*random.hitRate(), random.perEngine)
	fmt.Fprintf(stdout, "  bound     %5.1f%%   (one engine with an unlimited cache: every reuse in the slice)\n", 100*bound.hitRate())
	if len(groups) > 0 {
		kv, rnd := siblings(groups, &routed.demoTally), siblings(groups, &random)
		fmt.Fprintf(stdout, "sibling bursts (%d groups of %d): siblings on their group's first one's engine, and their prefix hit rate:\n", len(groups), bursts.size)
		fmt.Fprintf(stdout, "  kvrouter  together %5.1f%%   hit rate %5.1f%%   (%s)\n", 100*kv.together, 100*kv.hitRate, predictLabel)
		fmt.Fprintf(stdout, "  random    together %5.1f%%   hit rate %5.1f%%\n", 100*rnd.together, 100*rnd.hitRate)
	}
	ps := fleet.prefillStats()
	fmt.Fprintf(stdout, "KV events: %d batches published so far, %d before their request's prefill ended (earliest %v after its end)\n",
		ps.Batches, ps.Early, ps.MinLag.Round(time.Microsecond))
	if pd != nil {
		if err := pd.report(stdout); err != nil {
			return fail(err)
		}
	}
	if n := path.InFlight(); n != 0 {
		return fail(fmt.Errorf("%d requests still booked after every answer ended", n))
	}
	if *hold {
		fmt.Fprintf(stdout, "kvrouter demo: holding; the fleet page is at %s/ui — interrupt (Ctrl-C) to stop\n", apiSrv.url)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
	}
	return 0
}

// demoTally counts prompt and cached tokens and requests per engine, and
// keeps each request's (by its index in the slice).
type demoTally struct {
	prompt, cached int
	perEngine      []int
	per            []demoServed
}

// demoServed is one request's engine and tokens.
type demoServed struct {
	engine, prompt, cached int
}

func (t *demoTally) add(i, prompt, cached, engine int) {
	cached = min(cached, prompt)
	t.prompt += prompt
	t.cached += cached
	for len(t.perEngine) <= engine {
		t.perEngine = append(t.perEngine, 0)
	}
	t.perEngine[engine]++
	for len(t.per) <= i {
		t.per = append(t.per, demoServed{engine: -1})
	}
	t.per[i] = demoServed{engine: engine, prompt: prompt, cached: cached}
}

func (t *demoTally) hitRate() float64 {
	if t.prompt == 0 {
		return 0
	}
	return float64(t.cached) / float64(t.prompt)
}

// replayOffline serves the prompts on fresh simulated caches (no sockets,
// no router), choosing each request's engine with pick.
func replayOffline(prompts [][]uint32, engines, blockSize, capacity int, pick func(n int) int) (demoTally, error) {
	var t demoTally
	caches := make([]*simengine.Cache, engines)
	for i := range caches {
		c, err := simengine.NewCache(simengine.Config{BlockSize: blockSize, CapacityBlocks: capacity})
		if err != nil {
			return t, err
		}
		caches[i] = c
	}
	for i, p := range prompts {
		e := pick(engines)
		cached, _ := caches[e].Serve(p)
		t.add(i, len(p), cached*blockSize, e)
	}
	return t, nil
}

// demoFleet is the simulated engines and their OpenAI surfaces.
type demoFleet struct {
	engines []*simengine.Engine
	https   []*simengine.HTTPServer
	regs    []map[string]any // what each engine's registration adds (a disaggregated fleet's roles)
}

// newDemoFleet starts n engines, with pd (nil: none) their prefill and
// decode roles.
func newDemoFleet(n, blockSize, capacity int, opts simengine.HTTPOptions, pd *demoPD) (*demoFleet, error) {
	f := &demoFleet{}
	for i := 0; i < n; i++ {
		eo, ho, reg := simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: blockSize, CapacityBlocks: capacity}, opts, map[string]any(nil)
		if pd != nil {
			ho.Disagg, eo.Encoding, reg = pd.engine(i)
		}
		e, err := simengine.New(eo)
		if err != nil {
			f.close()
			return nil, err
		}
		f.engines, f.regs = append(f.engines, e), append(f.regs, reg)
		h, err := e.ServeHTTP("127.0.0.1:0", ho)
		if err != nil {
			f.close()
			return nil, err
		}
		f.https = append(f.https, h)
	}
	return f, nil
}

// prefillStats sums the engines' deferred publishes (the earliest lag of
// all).
func (f *demoFleet) prefillStats() simengine.PrefillStats {
	var sum simengine.PrefillStats
	for _, h := range f.https {
		ps := h.PrefillStats()
		if ps.Batches > 0 && (sum.Batches == 0 || ps.MinLag < sum.MinLag) {
			sum.MinLag = ps.MinLag
		}
		sum.Batches += ps.Batches
		sum.Early += ps.Early
	}
	return sum
}

func (f *demoFleet) close() {
	for _, h := range f.https {
		h.Close()
	}
	for _, e := range f.engines {
		e.Close()
	}
}

// loadPrompts expands the first n trace requests into token prompts.
func loadPrompts(path string, n, blockSize int, stdin io.Reader) ([][]uint32, error) {
	drv, err := openTrace(path, stdin, simengine.TraceConfig{TokensPerBlock: blockSize, Limit: n})
	if err != nil {
		return nil, err
	}
	var out [][]uint32
	for {
		p, err := drv.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p.Tokens)
	}
}

// demoClient is a small JSON client of kvrouter's API.
type demoClient struct {
	base string
	http *http.Client
}

func (c *demoClient) post(path string, body, out any) error {
	var r io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	resp, err := c.http.Post(c.base+path, "application/json", r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}
