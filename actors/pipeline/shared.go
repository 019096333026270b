package pipeline

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
)

// podTimeout bounds the wait for a shared socket's listener to take a pod
// added or forgotten.
const podTimeout = 5 * time.Second

// sharedSocket is one socket that several registered pods publish on,
// told apart by topic (AddPod): one listener, each pod its own stream.
type sharedSocket struct {
	pid *actor.PID
	cfg listener.Config // the first pod's: endpoint, bind, engine, topic, rank
	// next is the normalizer of every pod's batches.
	next *actor.PID
	mu   sync.Mutex // pods: the listener reads them as each incarnation starts
	pods map[string]messages.StreamID
}

// workers is the pods' worker ids (listener.Config.CurrentPods).
func (s *sharedSocket) workers() map[string]messages.WorkerID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]messages.WorkerID, len(s.pods))
	for pod, st := range s.pods {
		out[pod] = st.Worker
	}
	return out
}

// podRef is a registered pod's place: its socket and its name there.
type podRef struct {
	socket *sharedSocket
	pod    string
}

// AddPod follows stream cfg.Stream as the pod pod of the socket at
// cfg.Endpoint that several engines share, told apart by the topic
// convention kv@<pod>@<model> (listener.Config.TopicIdentity, with
// KnownPodsOnly: only the added pods are streams). The first pod of an
// endpoint opens the socket (binding it with cfg.Bind); later ones are
// added to its listener, and must agree on how it is read (bind, engine,
// topic prefix, dp rank). RemoveListener removes the pod, and closes the
// socket with its last one.
func (p *Pipeline) AddPod(cfg listener.Config, pod string) error {
	if pod == "" {
		return fmt.Errorf("worker %d rank %d: no pod for the shared socket %s", cfg.Stream.Worker, cfg.Stream.DpRank, cfg.Endpoint)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.listeners[cfg.Stream]; dup {
		return fmt.Errorf("worker %d rank %d already has a listener", cfg.Stream.Worker, cfg.Stream.DpRank)
	}
	s, open := p.shared[cfg.Endpoint]
	if open {
		if err := s.agrees(cfg); err != nil {
			return err
		}
	} else {
		s = &sharedSocket{cfg: cfg, next: p.normalizerOf(cfg.Stream), pods: map[string]messages.StreamID{}}
	}
	s.mu.Lock()
	other, taken := s.pods[pod]
	if !taken {
		s.pods[pod] = cfg.Stream
	}
	s.mu.Unlock()
	if taken {
		return fmt.Errorf("pod %s of %s is worker %d's already", pod, cfg.Endpoint, other.Worker)
	}
	if err := p.startPod(s, open, cfg, pod); err != nil {
		s.mu.Lock()
		delete(s.pods, pod)
		s.mu.Unlock()
		return err
	}
	if f, ok := p.index.(FencedIndex); ok {
		f.StartFeed(cfg.Stream)
	}
	p.shared[cfg.Endpoint] = s
	p.listeners[cfg.Stream] = s.pid
	p.pods[cfg.Stream] = podRef{socket: s, pod: pod}
	return nil
}

// startPod opens the socket with its first pod, or adds pod to its
// listener.
func (p *Pipeline) startPod(s *sharedSocket, open bool, cfg listener.Config, pod string) error {
	if open {
		_, err := p.system.Root.RequestFuture(s.pid, &listener.AddPod{Pod: pod, Worker: cfg.Stream.Worker}, podTimeout).Result()
		return err
	}
	lc := cfg
	lc.Stream = messages.StreamID{DpRank: cfg.Stream.DpRank}
	lc.TopicIdentity, lc.KnownPodsOnly, lc.Pods, lc.CurrentPods = true, true, nil, s.workers
	lc.Next = s.next
	props, err := listener.Props(lc)
	if err != nil {
		return err
	}
	s.pid = p.system.Root.WithGuardian(listenerSupervision).Spawn(props)
	return nil
}

// agrees checks that a pod added to an open socket reads it as its first
// pod did.
func (s *sharedSocket) agrees(cfg listener.Config) error {
	c := s.cfg
	if c.Bind != cfg.Bind || c.Engine != cfg.Engine || c.Topic != cfg.Topic || c.Stream.DpRank != cfg.Stream.DpRank {
		return fmt.Errorf("worker %d rank %d: the shared socket %s is read with bind=%v, engine %q, topic %q, dp rank %d; this pod asks for bind=%v, engine %q, topic %q, dp rank %d",
			cfg.Stream.Worker, cfg.Stream.DpRank, cfg.Endpoint, c.Bind, c.Engine, c.Topic, c.Stream.DpRank, cfg.Bind, cfg.Engine, cfg.Topic, cfg.Stream.DpRank)
	}
	return nil
}

// removePod removes a registered pod from its socket (called with p.mu
// held, the stream already out of the listeners): it waits until the
// listener dropped the pod's stream, or returns the socket's listener to
// stop when that was its last pod.
func (p *Pipeline) removePod(ref podRef, stream messages.StreamID) (stop *actor.PID, err error) {
	delete(p.pods, stream)
	s := ref.socket
	s.mu.Lock()
	delete(s.pods, ref.pod)
	last := len(s.pods) == 0
	s.mu.Unlock()
	if last {
		delete(p.shared, s.cfg.Endpoint)
		return s.pid, nil
	}
	_, err = p.system.Root.RequestFuture(s.pid, &listener.ForgetPod{Pod: ref.pod}, podTimeout).Result()
	return nil, err
}

// SharedSocketStats answers the whole Stats of each socket shared by topic,
// by endpoint: what no pod's view carries (messages refused before they
// reached a pod's stream: topics outside the convention, pods no
// registration names, pods past the cap), besides every pod's figures.
func (p *Pipeline) SharedSocketStats(timeout time.Duration) (map[string]*listener.Stats, error) {
	p.mu.Lock()
	pids := make(map[string]*actor.PID, len(p.shared))
	for ep, s := range p.shared {
		pids[ep] = s.pid
	}
	p.mu.Unlock()
	out := make(map[string]*listener.Stats, len(pids))
	for ep, pid := range pids {
		st, err := request[*listener.Stats](p.system, pid, &listener.StatsRequest{}, timeout)
		if err != nil {
			return nil, fmt.Errorf("shared socket %s: %w", ep, err)
		}
		out[ep] = st
	}
	return out, nil
}

// uniqueListeners returns every listener once (a shared socket's serves
// several streams).
func uniqueListeners(ls map[messages.StreamID]*actor.PID) []*actor.PID {
	seen := map[*actor.PID]bool{}
	var out []*actor.PID
	for _, pid := range ls {
		if !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	return out
}
