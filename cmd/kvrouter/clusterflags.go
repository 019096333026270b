package main

import (
	"errors"
	"flag"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/kvrouter/kvrouter/actors/service"
	"github.com/kvrouter/kvrouter/cluster/clusterindex"
	"github.com/kvrouter/kvrouter/cluster/member"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

// clusterFlags are kvrouter serve's cluster flags. With
// --cluster set, the process joins a protoactor cluster and every
// namespace's index is the cluster index: shard grains spread over the
// members, answers within --route-deadline, slices rebuilt from the
// engines' replay buffers when a host is lost; the worker registry is the
// cluster's (every host sees every registration) and each stream is
// followed by one host (cluster/README.md).
type clusterFlags struct {
	name             string
	provider         string
	etcdEndpoints    string
	advertise        string
	bind             string
	automanagedPort  int
	automanagedPeers string
	shards           int
	routeDeadline    time.Duration
	tlsDir           string
}

// addClusterFlags registers the cluster flags on serve's flag set.
func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	c := &clusterFlags{}
	fs.StringVar(&c.name, "cluster", "", "join the router cluster NAME (empty: one host, no cluster)")
	fs.StringVar(&c.provider, "cluster-provider", string(member.ProviderEtcd),
		"membership provider: etcd (production), automanaged (members poll each other over HTTP; development), test (in-process, one member)")
	fs.StringVar(&c.etcdEndpoints, "etcd-endpoints", "", "etcd client URLs, comma-separated (--cluster-provider etcd)")
	fs.StringVar(&c.advertise, "advertise", "", "HOST:PORT other members dial to reach this one (default: the --cluster-bind address); refused beside a --cluster-bind on port 0, which listens on a random port. /readyz answers 503 while this member cannot exchange messages with the members the provider lists")
	fs.StringVar(&c.bind, "cluster-bind", member.DefaultBind, "HOST:PORT the cluster transport (gRPC) listens on; port 0 picks one")
	fs.IntVar(&c.automanagedPort, "automanaged-port", 0, "this member's automanaged HTTP port (--cluster-provider automanaged)")
	fs.StringVar(&c.automanagedPeers, "automanaged-peers", "", "every member's automanaged HOST:PORT, comma-separated, this one included")
	fs.IntVar(&c.shards, "cluster-shards", clusterindex.DefaultShards, "shard grains per namespace; must be equal on every member")
	fs.DurationVar(&c.routeDeadline, "route-deadline", clusterindex.DefaultQueryDeadline,
		"longest a query waits for the shard grains; shards that miss it are left out and the answer is flagged partial")
	fs.StringVar(&c.tlsDir, "cluster-tls-dir", "", "mutual TLS between router hosts: DIR/ca.crt (the cluster's CA), DIR/tls.crt and DIR/tls.key (this host's certificate from it, ServerAuth and ClientAuth), re-read when they change; a host without a certificate from the CA cannot exchange messages with the others (empty: plaintext)")
	return c
}

// config is the cluster membership the flags ask for; nil without
// --cluster.
func (c *clusterFlags) config() (*service.ClusterConfig, error) {
	if c.name == "" {
		return nil, nil
	}
	if c.routeDeadline <= 0 || c.shards <= 0 {
		return nil, errors.New("--route-deadline and --cluster-shards must be positive")
	}
	cfg := member.Config{Name: c.name, Provider: member.Provider(c.provider), Bind: c.bind, Advertise: c.advertise,
		EtcdEndpoints: cli.SplitList(c.etcdEndpoints), AutomanagedPort: c.automanagedPort, AutomanagedPeers: cli.SplitList(c.automanagedPeers)}
	if cfg.Provider == member.ProviderTest {
		cfg.TestAgent = test.NewInMemAgent()
	}
	return &service.ClusterConfig{Member: cfg, Index: clusterindex.Config{Shards: c.shards, QueryDeadline: c.routeDeadline}}, nil
}
