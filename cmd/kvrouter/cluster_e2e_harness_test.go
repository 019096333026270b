package main

// The harness of the cluster end-to-end tests (clusterflags_e2e_test.go):
// kvrouter serve processes on one etcd, simulated engines, and the checks
// of each host's index against the engines' caches.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/bench/chaos"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/eventually"
)

// field is the value of key=value in a log line ("" when absent).
func field(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

type e2eCluster struct {
	bin, etcd, dir string
	hosts          []*e2eHost
	engines        []*e2eEngine
}

type e2eHost struct {
	url string
	cmd *exec.Cmd
	log *lockedBuffer
}

// lockedBuffer is a process's output, read while it is written.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type e2eEngine struct {
	eng     *simengine.Engine
	drv     *simengine.RandomDriver
	id      int
	prompts [][]uint32
}

func newE2ECluster(t *testing.T, hosts int) *e2eCluster {
	c := newE2EBase(t)
	for range hosts {
		c.addHost(t)
	}
	c.addEngines(t, hosts)
	return c
}

// newE2EBase builds kvrouter and starts etcd: a cluster with no host yet.
func newE2EBase(t *testing.T) *e2eCluster {
	if os.Getenv("KVROUTER_CLUSTER_E2E") != "1" {
		t.Skip("multi-process cluster test: set KVROUTER_CLUSTER_E2E=1 (make test-cluster); needs etcd")
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd not found (Debian: apt-get install etcd-server): %v", err)
	}
	c := &e2eCluster{dir: t.TempDir()}
	c.bin = filepath.Join(c.dir, "kvrouter")
	build := exec.Command("go", "build", "-o", c.bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the image builds it (Makefile: one build configuration)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	client, peer := freePort(t), freePort(t)
	c.etcd = "http://127.0.0.1:" + client
	etcd := exec.Command(etcdBin, "--name", "e2e", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", c.etcd, "--advertise-client-urls", c.etcd,
		"--listen-peer-urls", "http://127.0.0.1:"+peer, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peer,
		"--initial-cluster", "e2e=http://127.0.0.1:"+peer)
	start(t, etcd, &lockedBuffer{})
	c.eventually(t, "etcd healthy", 20*time.Second, func() error {
		resp, err := http.Get(c.etcd + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s", resp.Status)
		}
		return nil
	})
	return c
}

// addEngines registers the simulated engines through the hosts in turn
// and has them serve.
func (c *e2eCluster) addEngines(t *testing.T, hosts int) {
	t.Helper()
	for i := range e2eEngines {
		buffer := 10000
		if i == 4 {
			buffer = 3 // loses its history: rebuilt degraded after a move
		}
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
			BlockSize: e2eBlock, CapacityBlocks: 48, ReplayBuffer: buffer})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		drv, err := simengine.NewRandomDriver(simengine.RandomConfig{Seed: uint64(i + 1), BlockSize: e2eBlock, Prefixes: 4,
			MaxPrefixBlocks: 10, MaxSuffixTokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		e := &e2eEngine{eng: eng, drv: drv, id: 101 + i}
		c.engines = append(c.engines, e)
		// Through different hosts; one /register is seen by every host.
		if _, err := c.hosts[i%hosts].post("/register", map[string]any{"instance_id": e.id, "endpoint": eng.Endpoint(),
			"replay_endpoint": eng.ReplayEndpoint(), "model_name": e2eModel, "block_size": e2eBlock}); err != nil {
			t.Fatal(err)
		}
	}
	c.eventually(t, "every host lists every stream", 20*time.Second, func() error {
		for _, h := range c.hosts {
			if err := h.lists(c.engines, false); err != nil {
				return err
			}
		}
		return nil
	})
	c.serve(t, 25)
}

// addHost starts one more `kvrouter serve --cluster` process (extra: more
// flags) and waits until it is ready.
func (c *e2eCluster) addHost(t *testing.T, extra ...string) {
	t.Helper()
	h := c.startHost(t, extra...)
	c.eventually(t, "host "+h.url+" ready", 30*time.Second, func() error {
		_, err := h.get("/readyz")
		return err
	})
}

// startHost starts one more `kvrouter serve --cluster` process without
// waiting for it.
func (c *e2eCluster) startHost(t *testing.T, extra ...string) *e2eHost {
	t.Helper()
	h := &e2eHost{url: "http://127.0.0.1:" + freePort(t), log: &lockedBuffer{}}
	h.cmd = exec.Command(c.bin, append([]string{"serve", "--http", strings.TrimPrefix(h.url, "http://"), "--block-size", strconv.Itoa(e2eBlock),
		"--cluster", "e2e", "--cluster-provider", "etcd", "--etcd-endpoints", c.etcd,
		"--cluster-bind", "127.0.0.1:" + freePort(t), "--cluster-shards", "6", "--route-deadline", "300ms", "--timeout", "1s"}, extra...)...)
	start(t, h.cmd, h.log)
	c.hosts = append(c.hosts, h)
	return h
}

// start runs cmd until the test ends (SIGKILL then), its output in log,
// shown if the test fails.
func start(t *testing.T, cmd *exec.Cmd, log *lockedBuffer) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output (last 4 KiB):\n%s", filepath.Base(cmd.Path), tail(log.String(), 4096))
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// serve has every engine serve n prompts.
func (c *e2eCluster) serve(t *testing.T, n int) {
	t.Helper()
	for _, e := range c.engines {
		for range n {
			p, err := e.drv.Next()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.eng.ServeRequest(simengine.Request{Tokens: p.Tokens}); err != nil {
				t.Fatal(err)
			}
			e.prompts = append(e.prompts, p.Tokens)
		}
		if err := e.eng.Publish(); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *e2eCluster) eventually(t *testing.T, what string, within time.Duration, try func() error) {
	t.Helper()
	eventually.Within(t, within, what, func() (bool, string) {
		err := try()
		return err == nil, fmt.Sprint(err)
	})
}

// checkConverged waits (at most e2eRecover) until every host's index (GET
// /dump) equals the engines' caches by the chaos checker's rules — a
// phantom block is never allowed, a missing one only on a stream every
// host's /workers flags degraded — and every host answers /query alike for
// the engines' latest prompts.
func (c *e2eCluster) checkConverged(t *testing.T, when string, hosts []*e2eHost) {
	t.Helper()
	c.eventually(t, when+": every index equals the engines' caches, every host answers alike", e2eRecover, func() error {
		for _, h := range hosts {
			if err := h.lists(c.engines, true); err != nil {
				return err
			}
			if err := c.matchesTruth(h); err != nil {
				return err
			}
		}
		var first []byte
		for _, e := range c.engines {
			for _, p := range e.prompts[len(e.prompts)-3:] {
				for i, h := range hosts {
					b, err := h.post("/query", map[string]any{"token_ids": p, "model_name": e2eModel})
					if err != nil {
						return err
					}
					if i == 0 {
						first = b
					} else if !bytes.Equal(b, first) {
						return fmt.Errorf("/query: %s answers %s, %s answers %s", h.url, b, hosts[0].url, first)
					}
				}
			}
		}
		return nil
	})
}

// matchesTruth compares one host's dump with the engines' caches.
func (c *e2eCluster) matchesTruth(h *e2eHost) error {
	states, err := h.states()
	if err != nil {
		return err
	}
	sink := &blockSets{held: map[messages.WorkerKey]map[messages.ExternalHash]bool{}}
	b, err := h.get("/dump")
	if err != nil {
		return err
	}
	if err := httpapi.ReadDump(bytes.NewReader(b), sink); err != nil {
		return err
	}
	for _, e := range c.engines {
		key := messages.WorkerKey{Worker: messages.WorkerID(e.id)}
		held := e.eng.Contents().Held()
		var indexed []messages.ExternalHash
		for hash := range sink.held[key] {
			indexed = append(indexed, hash)
		}
		slices.Sort(held)
		slices.Sort(indexed)
		truth := chaos.Truth{Stream: messages.StreamID{Worker: key.Worker}, Held: held,
			HistoryHeld: e.eng.Options().ReplayBuffer > int(e.eng.Stats().NextSeq)}
		if r := chaos.CheckStream(truth, indexed, states[key]); !r.OK() {
			return fmt.Errorf("%s: %s", h.url, r)
		}
	}
	return nil
}

// blockSets is a DumpSink keeping each stream's blocks.
type blockSets struct {
	held map[messages.WorkerKey]map[messages.ExternalHash]bool
}

func (b *blockSets) Namespace(api.DumpNamespace) error { return nil }

func (b *blockSets) Event(ev messages.RouterEvent) error {
	k := messages.WorkerKey{Worker: ev.WorkerID, DpRank: ev.Event.DpRank}
	if b.held[k] == nil {
		b.held[k] = map[messages.ExternalHash]bool{}
	}
	switch ev.Event.Kind {
	case messages.KindStored:
		for _, bl := range ev.Event.Blocks {
			b.held[k][bl.BlockHash] = true
		}
	case messages.KindRemoved:
		for _, h := range ev.Event.Removed {
			delete(b.held[k], h)
		}
	case messages.KindCleared:
		clear(b.held[k])
	}
	return nil
}

// lists checks that the host lists every engine's stream and, when
// settled, that each is exact or degraded (reported by the host that
// follows it, past its first batch).
func (h *e2eHost) lists(es []*e2eEngine, settled bool) error {
	states, err := h.states()
	if err != nil {
		return err
	}
	var want, got []messages.WorkerKey
	for _, e := range es {
		want = append(want, messages.WorkerKey{Worker: messages.WorkerID(e.id)})
	}
	for k, st := range states {
		if settled && st != coalescer.StateExact && st != coalescer.StateDegraded {
			return fmt.Errorf("%s: stream %v not settled (%v)", h.url, k, st)
		}
		got = append(got, k)
	}
	slices.SortFunc(got, func(a, b messages.WorkerKey) int { return int(a.Worker) - int(b.Worker) })
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: /workers lists %v, want %v", h.url, got, want)
	}
	return nil
}

// states reads GET /workers: each stream's state (each must name its
// owner host).
func (h *e2eHost) states() (map[messages.WorkerKey]coalescer.StreamState, error) {
	b, err := h.get("/workers")
	if err != nil {
		return nil, err
	}
	var ws []api.WorkerInfo
	if err := json.Unmarshal(b, &ws); err != nil {
		return nil, fmt.Errorf("%s /workers: %w", h.url, err)
	}
	out := map[messages.WorkerKey]coalescer.StreamState{}
	for _, w := range ws {
		for _, r := range w.Ranks {
			st := coalescer.StateUnknown
			switch r.State {
			case api.StateExact:
				st = coalescer.StateExact
			case api.StateDegraded:
				st = coalescer.StateDegraded
			}
			if r.Owner == "" {
				return nil, fmt.Errorf("%s /workers: worker %d rank %d has no owner host", h.url, w.InstanceID, r.DpRank)
			}
			out[messages.WorkerKey{Worker: w.InstanceID, DpRank: r.DpRank}] = st
		}
	}
	return out, nil
}

func (h *e2eHost) get(path string) ([]byte, error) {
	resp, err := http.Get(h.url + path)
	if err != nil {
		return nil, err
	}
	return body(resp, h.url+path)
}

func (h *e2eHost) post(path string, v any) ([]byte, error) {
	b, _ := json.Marshal(v)
	resp, err := http.Post(h.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return body(resp, h.url+path)
}

func body(resp *http.Response, what string) ([]byte, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s: %s %s", what, resp.Status, b)
	}
	return b, nil
}
