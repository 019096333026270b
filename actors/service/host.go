package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/actors/telemetry"
	"github.com/kvrouter/kvrouter/cluster/clusterindex"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/messages/api"
)

// A Host is one whole router: the Service (pipelines, index, routing,
// sessions, registry) and, in a cluster, its membership — what `kvrouter
// serve` runs and what bench/ starts in process. StartHost assembles it in
// the order serve needs: join the cluster, start the service, register the
// first workers; Close and Leave take it down in the reverse order.
type Host struct {
	Service *Service
	// Node is this host's cluster member; nil on one host.
	Node    *clusterindex.Node
	metrics *telemetry.Metrics
}

// HostConfig configures StartHost.
type HostConfig struct {
	// Service configures the service; in a cluster StartHost sets its
	// Pipeline.NewIndex and Cluster from the membership.
	Service Config
	// Cluster, when set, makes the host a member of a router cluster:
	// every namespace's index is the cluster index (shard grains spread
	// over the members) and the worker registry is the cluster's. Nil: one
	// host with its own index and registry.
	Cluster *ClusterConfig
	// Startup registers the first workers.
	Startup Startup
	// Logger logs the startup; nil discards.
	Logger *slog.Logger
}

// ClusterConfig is a host's cluster membership: how it joins (member) and
// the cluster index's shards and query deadline (equal on every member).
type ClusterConfig struct {
	Member member.Config
	Index  clusterindex.Config
}

// Startup is how a host registers its first workers: from a peer's dump,
// a worker file, then Workers, in that order (a bootstrap needs an empty
// router).
type Startup struct {
	BootstrapFrom string // peer router URL ("" none)
	Token         string // bearer token sent to the peer
	WorkersFile   string // JSON array of POST /register bodies ("" none)
	Workers       []api.Registration
}

// bootstrapTimeout bounds reading a peer's dump.
const bootstrapTimeout = 2 * time.Minute

// StartHost joins the cluster (cfg.Cluster set), starts the service on
// system and registers the startup workers. On an error nothing is left
// running.
func StartHost(system *actor.ActorSystem, cfg HostConfig) (*Host, error) {
	h := &Host{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Service.Logger == nil {
		cfg.Service.Logger = cfg.Logger
	}
	if c := cfg.Cluster; c != nil {
		node := clusterindex.NewNode(c.Index)
		if _, err := node.Join(system, c.Member); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Member.Name, err)
		}
		h.Node = node
		cfg.Service.Pipeline.NewIndex, cfg.Service.Cluster = node.NewIndex, node.Registry()
	}
	svc, err := New(system, cfg.Service)
	if err != nil {
		h.Leave()
		return nil, err
	}
	h.Service = svc
	if err := svc.start(cfg.Startup, cfg.Logger); err != nil {
		h.Close()
		h.Leave()
		return nil, err
	}
	return h, nil
}

// Handler returns the host's HTTP API with kvrouter serve's metrics
// (Service.Handler over a new telemetry.Metrics, shut down by Close; more
// as there).
func (h *Host) Handler(opts httpapi.Options, more ...func(io.Writer) error) (*httpapi.Handler, error) {
	m, err := telemetry.NewMetrics(h.Service, 0)
	if err != nil {
		return nil, err
	}
	h.metrics = m
	return h.Service.Handler(m, opts, more...), nil
}

// Metrics are the metrics Handler serves (nil before Handler).
func (h *Host) Metrics() *telemetry.Metrics { return h.metrics }

// Close stops the metrics and the service; the host stays a cluster
// member until Leave.
func (h *Host) Close() {
	if h.metrics != nil {
		_ = h.metrics.Shutdown(context.Background())
	}
	h.Service.Close()
}

// Leave leaves the cluster (nothing on one host); call it after Close, so
// the member leaves last.
func (h *Host) Leave() {
	if h.Node != nil {
		h.Node.Leave()
	}
}

// start registers st's workers: the peer's dump, the worker file, then
// st.Workers.
func (s *Service) start(st Startup, log *slog.Logger) error {
	s.addPeer(st.BootstrapFrom, st.Token, log)
	if st.BootstrapFrom != "" {
		ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
		rep, err := s.Bootstrap(ctx, st.BootstrapFrom, st.Token)
		cancel()
		if err != nil {
			return fmt.Errorf("bootstrap from %s: %w", st.BootstrapFrom, err)
		}
		log.Info("bootstrapped from a peer", "peer", st.BootstrapFrom, "namespaces", rep.Namespaces,
			"events", rep.Events, "streams_resumed", rep.Resumed, "streams_fresh", rep.Fresh)
	}
	var regs []api.Registration
	if st.WorkersFile != "" {
		f, err := os.Open(st.WorkersFile)
		if err != nil {
			return fmt.Errorf("worker file: %w", err)
		}
		regs, err = httpapi.ReadWorkerFile(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("worker file %s: %w", st.WorkersFile, err)
		}
	}
	for _, reg := range append(regs, st.Workers...) {
		if err := s.Register(context.Background(), reg); err != nil {
			return fmt.Errorf("worker %d rank %d: %w", reg.InstanceID, reg.DpRank, err)
		}
	}
	return nil
}
