package loadgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/pipeline"
	"github.com/kvrouter/kvrouter/actors/routing"
	"github.com/kvrouter/kvrouter/actors/routing/predicted"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/cluster/clusterindex"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// benchModel is the model name every simulated worker registers under.
const benchModel = "bench"

// clusterConfig sizes a running router and its simulated engines.
type clusterConfig struct {
	Workers   int
	BlockSize int
	Capacity  int // blocks per engine
	// Shards is the index's shard count: shard actors on one host, shard
	// grains per namespace in a cluster.
	Shards int
	// Hosts is the number of routers: 1 is one process without a cluster;
	// more are members of one cluster (test membership provider, gRPC on
	// loopback) in this process, each with its own HTTP server.
	Hosts   int
	Routing routing.Config // the route actor's cost function
	// SessionCredit weighs a /route session_id's lineage (service.Config).
	SessionCredit float64
	// NoPredict turns predict-on-route off (serve's --predict-ttl 0).
	NoPredict  bool
	Logger     *slog.Logger
	MemProfile string // Config.MemProfile
}

// serviceConfig is the router's configuration for a run: the index's
// shard count, the routing cost function, the session credit and whether
// it predicts on route (its default TTL, or off).
func serviceConfig(cfg clusterConfig) service.Config {
	sc := service.Config{BlockSize: cfg.BlockSize, Routing: cfg.Routing, Timeout: 2 * time.Second,
		Pipeline: pipeline.Config{Index: indexer.Config{Shards: cfg.Shards}}, SessionCredit: cfg.SessionCredit}
	if cfg.NoPredict {
		sc.Predictions.TTL = predicted.Off
	}
	return sc
}

// cluster is the routers (hosts: each a service with its HTTP API on a
// loopback port) and the simulated engines, one per worker (worker id =
// index + 1).
type cluster struct {
	cfg     clusterConfig
	hosts   []*routerHost
	engines []*simengine.Engine
	// setupClears counts the AllBlocksCleared the setup had engines
	// publish to re-sync streams degraded before the run (awaitExact).
	setupClears int
	stopHB      chan struct{}
	hbDone      sync.WaitGroup
	closed      bool
}

// routerHost is one router: its actor system, service and HTTP server and,
// in a cluster, its member.
type routerHost struct {
	*service.Host
	system *actor.ActorSystem
	srv    *http.Server
	url    string
}

// host is the router that takes request i: round robin over the hosts, so
// a request's route, prefill_done and free go to the same one (each host
// keeps the load of the requests it routed).
func (c *cluster) host(i int) *routerHost { return c.hosts[i%len(c.hosts)] }

// clusterName is the bench cluster's name.
const clusterName = "kvrouter-bench"

// startHosts starts cfg.Hosts routers; more than one join one cluster and
// are ready when each sees all the members.
func startHosts(cfg clusterConfig) ([]*routerHost, error) {
	n := max(cfg.Hosts, 1)
	var agent *test.InMemAgent
	if n > 1 {
		agent = test.NewInMemAgent()
	}
	var hosts []*routerHost
	fail := func(err error) ([]*routerHost, error) {
		closeHosts(hosts)
		return nil, err
	}
	for range n {
		h := &routerHost{system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger }))}
		hc := service.HostConfig{Service: serviceConfig(cfg), Logger: cfg.Logger}
		if n > 1 {
			// GossipInterval: several members in one process (member.Config).
			hc.Cluster = &service.ClusterConfig{Index: clusterindex.Config{Shards: cfg.Shards},
				Member: member.Config{Name: clusterName, Provider: member.ProviderTest, TestAgent: agent, GossipInterval: time.Hour}}
		}
		host, err := service.StartHost(h.system, hc)
		if err != nil {
			return fail(fmt.Errorf("loadgen: host %d: %w", len(hosts)+1, err))
		}
		h.Host = host
		hosts = append(hosts, h)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fail(err)
		}
		h.url = "http://" + ln.Addr().String()
		h.srv = httpapi.NewServer("", httpapi.New(host.Service, httpapi.Options{Logger: cfg.Logger}), httpapi.Options{Logger: cfg.Logger})
		go func() { _ = h.srv.Serve(ln) }()
	}
	if n > 1 {
		deadline := time.Now().Add(30 * time.Second)
		for !allJoined(hosts) {
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("loadgen: the %d hosts never all saw each other", n))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return hosts, nil
}

// allJoined reports whether every host's member sees every host.
func allJoined(hosts []*routerHost) bool {
	for _, h := range hosts {
		if tp := h.Node.Member().Topology(); tp == nil || len(tp.Members) != len(hosts) {
			return false
		}
	}
	return true
}

// closeHosts stops the routers: HTTP servers, services, then (in a
// cluster) the members, which leave.
func closeHosts(hosts []*routerHost) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, h := range hosts {
		if h.srv != nil {
			_ = h.srv.Shutdown(ctx)
			// Shutdown leaves connections a client dialed but never used
			// (net/http spares new ones for 5 s): their goroutines would
			// keep the router reachable.
			_ = h.srv.Close()
		}
		h.Close()
	}
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(h.Leave)
	}
	wg.Wait()
}

// heartbeatEvery keeps idle engines' streams alive: a listener recreates
// a socket that heard nothing for 10 s.
const heartbeatEvery = 3 * time.Second

// startCluster starts the router and the engines, registers every engine
// and waits until each stream is exact (it heard the engine's seq 0, or
// the setup's clear of its empty engine: awaitExact).
func startCluster(cfg clusterConfig) (*cluster, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hosts, err := startHosts(cfg)
	if err != nil {
		return nil, err
	}
	c := &cluster{cfg: cfg, hosts: hosts, stopHB: make(chan struct{})}
	for i := range cfg.Workers {
		e, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: cfg.BlockSize, CapacityBlocks: cfg.Capacity, HashSeed: uint64(i) + 1})
		if err != nil {
			c.close()
			return nil, fmt.Errorf("loadgen: engine %d: %w", i+1, err)
		}
		c.engines = append(c.engines, e)
		// Through each host in turn: a cluster replicates the registry.
		if err := c.host(i).Service.Register(context.Background(), api.Registration{InstanceID: messages.WorkerID(i + 1),
			Endpoint: e.Endpoint(), ReplayEndpoint: e.ReplayEndpoint(), ModelName: benchModel, BlockSize: uint32(cfg.BlockSize)}); err != nil {
			c.close()
			return nil, fmt.Errorf("loadgen: register engine %d: %w", i+1, err)
		}
		if err := e.Publish(); err != nil { // seq 0: the stream is exact from here
			c.close()
			return nil, err
		}
	}
	c.hbDone.Add(1)
	go c.heartbeats()
	if err := c.awaitExact(30*time.Second + time.Duration(cfg.Workers)*20*time.Millisecond); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *cluster) heartbeats() {
	defer c.hbDone.Done()
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stopHB:
			return
		case <-t.C:
			for _, e := range c.engines {
				_ = e.Publish()
			}
		}
	}
}

// streams reads /workers: how many ranks are not exact, and the index
// entries ((block, worker) pairs) in all.
func (c *cluster) streams() (notExact, entries int, err error) {
	st, err := c.streamStates()
	return st.notExact, st.entries, err
}

// streamStates is what /workers says of the streams.
type streamStates struct {
	notExact, entries int
	// degraded is the workers of the degraded ranks (history lost:
	// nothing but an engine's clear makes them exact again).
	degraded []messages.WorkerID
	// warnings counts the not-exact ranks' /workers warnings by text.
	warnings map[string]int
}

// String says why the streams are not exact.
func (s streamStates) String() string {
	out := fmt.Sprintf("%d streams not exact, %d of them degraded (history lost), the others recovering", s.notExact, len(s.degraded))
	for _, w := range slices.Sorted(maps.Keys(s.warnings)) {
		out += fmt.Sprintf("; %d warn %q", s.warnings[w], w)
	}
	return out
}

func (c *cluster) streamStates() (streamStates, error) {
	st := streamStates{warnings: map[string]int{}}
	ws, err := c.hosts[0].Service.Workers(context.Background())
	if err != nil {
		return st, err
	}
	for _, w := range ws {
		for _, r := range w.Ranks {
			if r.State != api.StateExact {
				st.notExact++
				for _, warn := range r.Warnings {
					st.warnings[warn]++
				}
			}
			if r.State == api.StateDegraded {
				st.degraded = append(st.degraded, w.InstanceID)
			}
			st.entries += int(r.Blocks)
		}
	}
	return st, nil
}

// Setup's wait for exact streams: /workers asks every stream's actors, so
// a fleet's poll is spaced by its size (50 ms up to 50 workers, 1 s at
// 1,000), lest the poll load the machine it waits on; a degraded stream
// is cleared again at most once per reclearEvery.
const (
	exactPollPerWorker = time.Millisecond
	exactPollMin       = 50 * time.Millisecond
	reclearEvery       = 2 * time.Second
)

// awaitExact waits until every stream is exact. A stream that lost its
// start (the engine's seq 0 went out before the listener's subscription
// took, and the replay that should have recovered it timed out on a
// loaded machine) is degraded, which nothing in the router ends by
// itself. At setup every engine's cache is empty, so the setup re-syncs
// such a stream: its engine publishes AllBlocksCleared, as an engine
// that empties its cache does, and the stream is exact from there
// (actors/listener/README.md, "Resyncs and the stream's state"). Each
// clear is counted (setupClears) and logged.
func (c *cluster) awaitExact(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	poll := max(exactPollMin, time.Duration(c.cfg.Workers)*exactPollPerWorker)
	cleared := map[messages.WorkerID]time.Time{}
	for {
		st, err := c.streamStates()
		if err == nil && st.notExact == 0 {
			return nil
		}
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("loadgen: %d workers after %v, %d engine clears: %v (err %v)", c.cfg.Workers, timeout, c.setupClears, st, err)
		}
		for _, id := range st.degraded {
			i := int(id) - 1
			if i < 0 || i >= len(c.engines) || now.Sub(cleared[id]) < reclearEvery {
				continue
			}
			if err := c.engines[i].Clear(); err != nil {
				return fmt.Errorf("loadgen: clear engine %d at setup: %w", id, err)
			}
			cleared[id] = now
			c.setupClears++
			c.cfg.Logger.Warn("bench setup: stream degraded before the run, its empty engine re-syncs it with AllBlocksCleared",
				"worker", id, "clears", c.setupClears)
		}
		time.Sleep(poll)
	}
}

// probe is one published batch whose arrival in the index is timed: the
// prompt served on worker (index) stored blocks complete blocks at sent.
type probe struct {
	worker int
	tokens []uint32
	blocks int
	sent   time.Time
}

// pollEvery is the pause between two visibility queries of one probe: a
// query of a one-host index is cheap, one of a cluster asks every shard
// grain (gRPC for the remote ones), and polling at the one-host pace
// would load the cluster enough to keep its answers partial.
func (c *cluster) pollEvery() time.Duration {
	if len(c.hosts) > 1 {
		return time.Millisecond
	}
	return 50 * time.Microsecond
}

var errNotVisible = errors.New("loadgen: published blocks not visible in the index")

// visible polls POST /query (in process) until the probe's worker holds
// at least its blocks of the prompt, and returns when that was first seen.
func (c *cluster) visible(ctx context.Context, p *probe, timeout time.Duration) (time.Time, error) {
	want := uint64(p.blocks * c.cfg.BlockSize)
	id := messages.WorkerID(p.worker + 1)
	deadline := p.sent.Add(timeout)
	for {
		q, err := c.hosts[0].Service.Query(ctx, api.QueryRequest{TokenIDs: p.tokens, ModelName: benchModel})
		now := time.Now()
		if err == nil && q.Scores[id][0] >= want {
			return now, nil
		}
		if now.After(deadline) || ctx.Err() != nil {
			return now, errNotVisible
		}
		time.Sleep(c.pollEvery())
	}
}

// serve serves request r on worker w's engine and returns the cached
// blocks and, when the serve published a batch of stored blocks, a probe.
func (c *cluster) serve(w int, r Request, session string) (cached int, p *probe, err error) {
	sent := time.Now()
	cached, err = c.engines[w].ServeRequest(simengine.Request{Tokens: r.Tokens, SessionID: session})
	if err != nil {
		return 0, nil, err
	}
	if n := min(len(r.Tokens)/c.cfg.BlockSize, c.cfg.Capacity); cached < n {
		p = &probe{worker: w, tokens: r.Tokens, blocks: n, sent: sent}
	}
	return cached, p, nil
}

// closeRouter stops the routers (the engines stay).
func (c *cluster) closeRouter() {
	if c.closed {
		return
	}
	c.closed = true
	closeHosts(c.hosts)
	c.hosts = nil
}

// close stops everything.
func (c *cluster) close() {
	select {
	case <-c.stopHB:
	default:
		close(c.stopHB)
	}
	c.hbDone.Wait()
	c.closeRouter()
	for _, e := range c.engines {
		_ = e.Close()
	}
	c.engines = nil
}
