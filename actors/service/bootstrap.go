package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/kvrouter/kvrouter/actors/frontend/httpapi"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// BootstrapReport says what Bootstrap loaded.
type BootstrapReport struct {
	Namespaces int
	Events     int
	// Resumed streams continue at their dumped position; Fresh ones were
	// registered without one (unknown position, or a dumped state that does
	// not map onto registered streams), their loaded state dropped first.
	Resumed, Fresh int
}

// Bootstrap warms an empty router up from a peer (kvrouter serve
// --bootstrap-from): it reads the peer's GET /dump and, per namespace,
// loads the events into the index and registers the dumped streams. A
// stream resumes at its dumped position (listener.Config.Resume: if the
// engine's history lines up with it, nothing is dropped and the stream
// keeps the peer's exact or degraded state; otherwise it resyncs as any
// stream does) when every stream of its worker has a position and every
// (worker, dp_rank) of the worker's dumped state is a registered stream.
// Otherwise the worker's loaded state is dropped and its streams start
// afresh. Call it before serving and before registering anything; token,
// when set, is sent as a bearer token.
func (s *Service) Bootstrap(ctx context.Context, peer, token string) (BootstrapReport, error) {
	if s.cfg.Cluster != nil {
		return BootstrapReport{}, errors.New("bootstrap: a cluster member rebuilds from the engines and its peers; --bootstrap-from is for one host")
	}
	s.mu.Lock()
	empty := len(s.workers) == 0
	s.mu.Unlock()
	if !empty {
		return BootstrapReport{}, errors.New("bootstrap: the router already has registered workers")
	}
	u, err := url.Parse(peer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return BootstrapReport{}, fmt.Errorf("bootstrap: peer %q is not an http(s)://host:port address", peer)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/dump"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return BootstrapReport{}, fmt.Errorf("bootstrap: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return BootstrapReport{}, fmt.Errorf("bootstrap: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return BootstrapReport{}, fmt.Errorf("bootstrap: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(msg)))
	}
	b := &bootSink{s: s}
	if err := httpapi.ReadDump(resp.Body, b); err != nil {
		return b.rep, fmt.Errorf("bootstrap from %s: %w", peer, err)
	}
	return b.rep, b.finish()
}

// bootLoad is how many events the loader sends to the index at a time.
const bootLoad = 4096

// bootSink loads a dump as ReadDump reads it: events go to the namespace's
// index in chunks, the streams are registered at the namespace's end.
type bootSink struct {
	s    *Service
	rep  BootstrapReport
	ns   *namespace
	hdr  api.DumpNamespace
	buf  []messages.RouterEvent
	keys map[messages.WorkerID]map[messages.DpRank]bool // dumped state per worker
}

// Namespace implements api.DumpSink.
func (b *bootSink) Namespace(hdr api.DumpNamespace) error {
	if err := b.finish(); err != nil {
		return err
	}
	b.s.mu.Lock()
	ns, err := b.s.space(hdr.ModelName, hdr.TenantID, int(hdr.BlockSize), true)
	b.s.mu.Unlock()
	if err != nil {
		return err
	}
	if ns.blockSize != int(hdr.BlockSize) {
		return fmt.Errorf("model %q tenant %q: block size %d here, %d in the dump", hdr.ModelName, hdr.TenantID, ns.blockSize, hdr.BlockSize)
	}
	b.ns, b.hdr, b.keys = ns, hdr, map[messages.WorkerID]map[messages.DpRank]bool{}
	b.rep.Namespaces++
	return nil
}

// Event implements api.DumpSink.
func (b *bootSink) Event(ev messages.RouterEvent) error {
	ranks := b.keys[ev.WorkerID]
	if ranks == nil {
		ranks = map[messages.DpRank]bool{}
		b.keys[ev.WorkerID] = ranks
	}
	ranks[ev.Event.DpRank] = true
	b.buf = append(b.buf, ev)
	b.rep.Events++
	if len(b.buf) >= bootLoad {
		b.ns.pipe.Load(b.buf)
		b.buf = nil
	}
	return nil
}

// finish ends the current namespace: the last events, then each worker's
// streams, resumed or fresh.
func (b *bootSink) finish() error {
	if b.ns == nil {
		return nil
	}
	ns := b.ns
	b.ns.pipe.Load(b.buf)
	b.buf, b.ns = nil, nil
	streams := map[messages.WorkerID][]api.DumpStream{}
	for _, st := range b.hdr.Streams {
		streams[st.WorkerID] = append(streams[st.WorkerID], st)
	}
	for w := range b.keys {
		if _, ok := streams[w]; !ok {
			ns.pipe.RemoveWorker(w) // a worker the peer no longer follows
		}
	}
	for w, sts := range streams {
		resume := resumable(sts, b.keys[w])
		if !resume && b.keys[w] != nil {
			ns.pipe.RemoveWorker(w) // after the loaded events: the front keeps the order
		}
		for _, st := range sts {
			var pos *messages.Position
			if resume {
				pos = &messages.Position{Stream: messages.StreamID{Worker: w, DpRank: st.DpRank}, Seq: *st.Seq, Exact: st.Exact, Known: true}
				b.rep.Resumed++
			} else {
				b.rep.Fresh++
			}
			reg := api.Registration{InstanceID: w, DpRank: st.DpRank, Endpoint: st.Endpoint, ReplayEndpoint: st.ReplayEndpoint,
				LoraName: st.LoraName, ServingEndpoint: st.ServingEndpoint, Engine: st.Engine,
				MetricsEndpoint: st.MetricsEndpoint, Role: st.Role, BootstrapHost: st.BootstrapHost, BootstrapPort: st.BootstrapPort,
				Bind: st.Bind, Topic: st.Topic, TopicPod: st.TopicPod, ModelName: b.hdr.ModelName, TenantID: b.hdr.TenantID, BlockSize: b.hdr.BlockSize}
			if err := b.s.register(reg, pos); err != nil {
				return fmt.Errorf("worker %d rank %d: %w", w, st.DpRank, err)
			}
		}
	}
	return nil
}

// resumable reports whether a worker's streams can resume: each has a
// position and each dp rank of its dumped state is one of them (a stream
// carrying several ranks cannot be told apart from its registration).
func resumable(sts []api.DumpStream, dumped map[messages.DpRank]bool) bool {
	ranks := map[messages.DpRank]bool{}
	for _, st := range sts {
		if st.Seq == nil {
			return false
		}
		ranks[st.DpRank] = true
	}
	for r := range dumped {
		if !ranks[r] {
			return false
		}
	}
	return true
}
