// Package member starts and stops a kvrouter process's protoactor cluster
// membership: remote on a host:port, a membership provider (the in-memory
// test provider, automanaged, or etcd), and the disthash identity lookup
// that places grains (virtual actors) on members by rendezvous hashing of
// their identity. It holds no kvrouter logic: the kinds it registers come
// from the caller (package clusterindex's shard kind).
package member

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Provider names a membership provider (flag --cluster-provider).
type Provider string

// Membership providers.
const (
	// ProviderTest is protoactor's in-memory provider: members of one
	// process sharing Config.TestAgent (unit tests).
	ProviderTest Provider = "test"
	// ProviderAutomanaged: members poll each other over HTTP
	// (Config.AutomanagedPort, Config.AutomanagedPeers); development on
	// loopback, no external service.
	ProviderAutomanaged Provider = "automanaged"
	// ProviderEtcd: members register under /kvrouter/<cluster> in etcd
	// with a leased key (production).
	ProviderEtcd Provider = "etcd"
)

// Defaults for Config's zero values.
const (
	DefaultBind            = "127.0.0.1:0"
	DefaultRequestTimeout  = time.Second
	DefaultEtcdDialTimeout = 5 * time.Second
	DefaultAutomanagedTTL  = 2 * time.Second
)

// Config describes one member. The future `kvrouter serve` flags map to it:
//
//	--cluster NAME             Name
//	--cluster-provider P       Provider (test | automanaged | etcd)
//	--etcd-endpoints URLS      EtcdEndpoints (comma-separated)
//	--advertise HOST:PORT      Advertise (what other members dial)
//	--cluster-bind HOST:PORT   Bind (where remote listens; default 127.0.0.1:0)
type Config struct {
	// Name is the cluster name; members of different names never meet.
	Name     string
	Provider Provider
	// Bind is where remote (gRPC) listens, host:port; port 0 picks one.
	Bind string
	// Advertise is the host:port other members dial, when it differs from
	// the bound address (NAT, a 0.0.0.0 bind). Empty: the bound address.
	Advertise string

	// EtcdEndpoints are etcd's client URLs (ProviderEtcd).
	EtcdEndpoints   []string
	EtcdDialTimeout time.Duration

	// AutomanagedPort is this member's automanaged HTTP port and
	// AutomanagedPeers every member's host:port of it, this one included
	// (ProviderAutomanaged). The HTTP server listens on all interfaces.
	AutomanagedPort  int
	AutomanagedPeers []string
	AutomanagedTTL   time.Duration

	// TestAgent is the shared in-memory registry (ProviderTest).
	TestAgent *test.InMemAgent

	// ServerTLS and DialTLS, when set (both or neither), secure remote's
	// gRPC listener and its connections to the other members: mutual TLS
	// against the cluster's CA (actors/certs ServerConfig, ClientConfig),
	// so a host without a certificate from it can neither send to this
	// member nor receive from it. Nil: plaintext.
	ServerTLS, DialTLS *tls.Config

	// Kinds are the grain kinds this member hosts.
	Kinds []*cluster.Kind
	// RequestTimeout bounds protoactor's own grain requests
	// (cluster.Request); kvrouter's route path sets tighter deadlines.
	RequestTimeout time.Duration
	// GossipInterval is protoactor's gossip period (0: its default,
	// 300 ms). Tests running several members in one process set it
	// beyond their length: the gossip informer shuffles peers with one
	// package-level math/rand shared, unsynchronized, by every member of
	// the process — a data race only when a process hosts several members.
	// Membership comes from the provider either way.
	GossipInterval time.Duration
}

// Member is a started cluster member.
type Member struct {
	Cluster *cluster.Cluster
	topo    *topology
}

// Start joins system to the cluster cfg describes; system must not have
// remote started. StartMember sleeps ~1 s (protoactor's own settling).
func Start(system *actor.ActorSystem, cfg Config) (*Member, error) {
	provider, err := newProvider(cfg)
	if err != nil {
		return nil, err
	}
	bind := cfg.Bind
	if bind == "" {
		bind = DefaultBind
	}
	host, portStr, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("cluster bind %q: %w", bind, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("cluster bind %q: port: %w", bind, err)
	}
	if err := CheckAdvertise(bind, cfg.Advertise); err != nil {
		return nil, err
	}
	var opts []remote.ConfigOption
	if cfg.Advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(cfg.Advertise))
	}
	switch {
	case cfg.ServerTLS != nil && cfg.DialTLS != nil:
		opts = append(opts, remote.WithServerOptions(grpc.Creds(credentials.NewTLS(cfg.ServerTLS))),
			remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg.DialTLS))))
	case cfg.ServerTLS != nil || cfg.DialTLS != nil:
		return nil, errors.New("cluster TLS needs both a server and a dial configuration")
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	ccfg := cluster.Configure(cfg.Name, provider, disthash.New(), remote.Configure(host, port, opts...),
		cluster.WithKinds(cfg.Kinds...), cluster.WithRequestTimeout(timeout))
	if cfg.GossipInterval > 0 {
		ccfg.GossipInterval = cfg.GossipInterval
	}
	c := cluster.New(system, ccfg)
	topo := &topology{}
	sub := system.EventStream.Subscribe(topo.set)
	if err := startMember(c); err != nil {
		system.EventStream.Unsubscribe(sub)
		return nil, fmt.Errorf("start cluster member %q: %w", cfg.Name, err)
	}
	return &Member{Cluster: c, topo: topo}, nil
}

// CheckAdvertise refuses an advertised address other members could never
// reach: one that is not host:port, or any advertised port beside a bind
// on port 0 (which listens on a port picked at random, so the advertised
// one is almost surely closed and every message to this member is refused
// while it looks healthy). Advertise a port only with a fixed bind port.
func CheckAdvertise(bind, advertise string) error {
	if advertise == "" {
		return nil
	}
	_, aport, err := net.SplitHostPort(advertise)
	if err != nil {
		return fmt.Errorf("cluster advertise %q: %w", advertise, err)
	}
	if _, bport, err := net.SplitHostPort(bind); err == nil && bport == "0" {
		return fmt.Errorf("cluster advertise %q with --cluster-bind %q: port 0 listens on a random port, not %s, so no member could reach this one; bind the advertised port (--cluster-bind HOST:%s)",
			advertise, bind, aport, aport)
	}
	return nil
}

// startMember turns protoactor's panics (listen failure, provider error)
// into an error.
func startMember(c *cluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	c.StartMember()
	return nil
}

func newProvider(cfg Config) (cluster.ClusterProvider, error) {
	if cfg.Name == "" {
		return nil, errors.New("cluster name is empty")
	}
	switch cfg.Provider {
	case ProviderTest:
		if cfg.TestAgent == nil {
			return nil, errors.New("cluster provider test needs an in-memory agent")
		}
		return test.NewTestProvider(cfg.TestAgent, test.WithTestProviderServiceTtl(time.Second),
			test.WithTestProviderRefreshTtl(200*time.Millisecond)), nil
	case ProviderAutomanaged:
		if cfg.AutomanagedPort <= 0 || len(cfg.AutomanagedPeers) == 0 {
			return nil, errors.New("cluster provider automanaged needs its port and the peers' host:port list")
		}
		ttl := cfg.AutomanagedTTL
		if ttl <= 0 {
			ttl = DefaultAutomanagedTTL
		}
		return automanaged.NewWithConfig(ttl, cfg.AutomanagedPort, cfg.AutomanagedPeers...), nil
	case ProviderEtcd:
		if len(cfg.EtcdEndpoints) == 0 {
			return nil, errors.New("cluster provider etcd needs --etcd-endpoints")
		}
		dial := cfg.EtcdDialTimeout
		if dial <= 0 {
			dial = DefaultEtcdDialTimeout
		}
		p, err := etcd.NewWithConfig("/kvrouter/"+cfg.Name, clientv3.Config{Endpoints: cfg.EtcdEndpoints, DialTimeout: dial})
		if err != nil {
			return nil, fmt.Errorf("etcd client %v: %w", cfg.EtcdEndpoints, err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("unknown cluster provider %q (test, automanaged, etcd)", cfg.Provider)
}

// Address is the member's advertised host:port.
func (m *Member) Address() string { return m.Cluster.ActorSystem.Address() }

// Shutdown leaves the cluster gracefully: the provider deregisters the
// member (the others rebalance its grains at once), then the actor system
// and remote stop. It takes ~2 s (protoactor waits for ownership to
// move).
func (m *Member) Shutdown() { m.Cluster.Shutdown(true) }
