package simengine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
)

// DefaultEndpoint is where the PUB socket binds when Options.Endpoint is
// empty (vLLM's port on loopback).
const DefaultEndpoint = "tcp://127.0.0.1:5557"

// ErrClosed is returned by Engine methods after Close.
var ErrClosed = errors.New("simengine: engine closed")

// Options configure an Engine. Zero values take the defaults noted.
type Options struct {
	// Endpoint is the PUB address; it binds (tcp://127.0.0.1:0 picks a free
	// port, see Engine.Endpoint) unless Connect is set. Default
	// DefaultEndpoint.
	Endpoint string
	// Connect dials Endpoint instead of binding, for routers that bind their
	// SUB and let engines dial in.
	Connect bool
	// ReplayEndpoint is the replay ROUTER's bind address; "" disables replay.
	ReplayEndpoint string
	// LegacyReplay answers replay requests in the older 3-frame layout
	// [id, "", seq, payload] instead of vLLM ≥ 0.26's [id, "", topic, seq,
	// payload].
	LegacyReplay bool
	Topic        string
	SeqStart     uint64 // the first seq (vLLM and SGLang: 0)
	DpRank       uint32
	// NilRank publishes nil as the batch rank (SGLang without attention DP).
	NilRank        bool
	BlockSize      int      // default 16
	CapacityBlocks int      // default 8192
	Medium         string   // default "GPU"
	HashSeed       uint64   // engine hash chain seed, see Config
	Encoding       Encoding // default EncodingVLLMMap
	ReplayBuffer   int      // batches kept for replay, default 10000
	// DropSeqs, when set, is asked about each batch's seq: true consumes the
	// seq and keeps the batch for replay but does not publish it (a loss on
	// the wire). It is called with the engine's lock held and must not call
	// the Engine.
	DropSeqs func(seq uint64) bool
	// Linger is how long Close waits before closing the sockets, so queued
	// messages get out (zmq4 has no ZMQ_LINGER). Default 0.
	Linger time.Duration
	// HWM is the PUB socket's high-water mark in messages: past it, new
	// messages are dropped, as libzmq's PUB drops for a slow subscriber
	// (vLLM sets 100,000). Default 0: zmq4's unbounded queue, which never
	// drops. zmq4 counts one queue for all subscribers and reports no drop.
	HWM int
	// Now is the clock for batch timestamps; default time.Now.
	Now func() time.Time
}

// ResetOptions say what a simulated restart (Engine.ResetSeq) loses.
type ResetOptions struct {
	// ClearCache empties the cache silently, as a restarted process starts
	// empty (no AllBlocksCleared is published: listeners must infer it from
	// the seq going back).
	ClearCache bool
	// ClearReplay empties the replay buffer. When false, the old batches
	// stay and a replay may return seqs out of order, as a misbehaving
	// engine would.
	ClearReplay bool
}

// Stats are an Engine's counters.
type Stats struct {
	NextSeq    uint64
	Published  uint64 // batches sent on the PUB socket (heartbeats included)
	Heartbeats uint64
	Dropped    uint64 // batches withheld by DropSeqs
	// SentBlocks counts the stored blocks of the batches handed to the PUB
	// socket (not those withheld; those zmq4 drops past HWM are counted).
	SentBlocks        uint64
	PublishErrors     uint64
	ReplayRequests    uint64
	ReplayedBatches   uint64
	BadReplayRequests uint64
	Blocks            int // blocks held now
	CapacityBlocks    int
	Cache             CacheStats
}

// Engine is a simulated engine worker: a Cache behind a PUB socket and an
// optional replay ROUTER. Its methods are safe for concurrent use.
type Engine struct {
	opts     Options
	endpoint string
	replayEP string

	mu     sync.Mutex
	cache  *Cache
	enc    *Encoder
	seq    uint64
	ring   replayRing
	stats  Stats
	closed bool

	pub        zmq4.Socket
	router     zmq4.Socket
	replayDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// New starts an engine: it binds (or dials) the PUB socket and, when
// configured, binds the replay ROUTER and serves it on a goroutine.
func New(opts Options) (*Engine, error) {
	opts = withDefaults(opts)
	if opts.ReplayBuffer < 0 {
		return nil, fmt.Errorf("simengine: replay buffer %d, want ≥ 0", opts.ReplayBuffer)
	}
	cache, err := NewCache(Config{
		BlockSize: opts.BlockSize, CapacityBlocks: opts.CapacityBlocks,
		DpRank: opts.DpRank, Medium: opts.Medium, HashSeed: opts.HashSeed,
	})
	if err != nil {
		return nil, err
	}
	enc, err := NewEncoder(opts.Encoding)
	if err != nil {
		return nil, err
	}
	e := &Engine{opts: opts, cache: cache, enc: enc, seq: opts.SeqStart}
	e.ring.init(opts.ReplayBuffer)
	e.pub = zmq4.NewPub(context.Background())
	if opts.Connect {
		err = e.pub.Dial(opts.Endpoint)
	} else {
		err = e.pub.Listen(opts.Endpoint)
	}
	if err != nil {
		e.pub.Close()
		return nil, fmt.Errorf("simengine: PUB on %s: %w", opts.Endpoint, err)
	}
	if opts.HWM > 0 {
		if err := e.pub.SetOption(zmq4.OptionHWM, opts.HWM); err != nil {
			e.pub.Close()
			return nil, fmt.Errorf("simengine: PUB high-water mark %d: %w", opts.HWM, err)
		}
	}
	e.endpoint = boundEndpoint(opts.Endpoint, e.pub.Addr())
	if opts.ReplayEndpoint != "" {
		e.router = zmq4.NewRouter(context.Background())
		if err := e.router.Listen(opts.ReplayEndpoint); err != nil {
			e.router.Close()
			e.pub.Close()
			return nil, fmt.Errorf("simengine: replay ROUTER on %s: %w", opts.ReplayEndpoint, err)
		}
		e.replayEP = boundEndpoint(opts.ReplayEndpoint, e.router.Addr())
		e.replayDone = make(chan struct{})
		go e.serveReplay()
	}
	return e, nil
}

func withDefaults(o Options) Options {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	if o.BlockSize == 0 {
		o.BlockSize = 16
	}
	if o.CapacityBlocks == 0 {
		o.CapacityBlocks = 8192
	}
	if o.Encoding == "" {
		o.Encoding = EncodingVLLMMap
	}
	if o.ReplayBuffer == 0 {
		o.ReplayBuffer = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// boundEndpoint names what a socket actually listens on: a tcp endpoint
// with its real port (for ":0"), anything else as configured.
func boundEndpoint(configured string, addr net.Addr) string {
	if addr == nil || !strings.HasPrefix(configured, "tcp://") {
		return configured
	}
	return "tcp://" + addr.String()
}

// OffsetEndpoint applies vLLM's data-parallel rule: rank r > 0 publishes on
// port base+r (tcp) or with the suffix "_dp<r>" (inproc, ipc). Port 0 (pick
// a free port) is left alone.
func OffsetEndpoint(endpoint string, rank uint32) (string, error) {
	if endpoint == "" || rank == 0 {
		return endpoint, nil
	}
	if !strings.HasPrefix(endpoint, "tcp://") {
		return fmt.Sprintf("%s_dp%d", endpoint, rank), nil
	}
	i := strings.LastIndexByte(endpoint, ':')
	port, err := strconv.ParseUint(endpoint[i+1:], 10, 16)
	if i < len("tcp://") || err != nil {
		return "", fmt.Errorf("simengine: endpoint %q has no port to offset by dp rank %d", endpoint, rank)
	}
	if port == 0 {
		return endpoint, nil // a free port is picked anyway
	}
	if port+uint64(rank) > 65535 {
		return "", fmt.Errorf("simengine: endpoint %q offset by dp rank %d exceeds port 65535", endpoint, rank)
	}
	return fmt.Sprintf("%s:%d", endpoint[:i], port+uint64(rank)), nil
}

// Endpoint returns the PUB address subscribers dial (with the real port
// when the configured one was 0).
func (e *Engine) Endpoint() string { return e.endpoint }

// ReplayEndpoint returns the replay ROUTER's address, or "" without replay.
func (e *Engine) ReplayEndpoint() string { return e.replayEP }

// Options returns the engine's options with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Serve serves one prompt for a session ("" for none), publishes the batch
// of events it caused (nothing when it was a full hit, as vLLM publishes no
// empty batches) and returns how many of its blocks were cached. Errors are
// counted in Stats.PublishErrors; use ServeRequest to see them.
func (e *Engine) Serve(tokens []uint32, sessionID string) (cachedBlocks int) {
	cached, _ := e.ServeRequest(Request{Tokens: tokens, SessionID: sessionID})
	return cached
}

// ServeRequest is Serve with a LoRA name and cache salt, returning the
// publish error.
func (e *Engine) ServeRequest(r Request) (cachedBlocks int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, ErrClosed
	}
	cached, events := e.cache.ServeRequest(r)
	if len(events) == 0 {
		return cached, nil
	}
	return cached, e.publishLocked(events)
}

// Publish sends an empty batch: a heartbeat, which still takes a seq.
func (e *Engine) Publish() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.stats.Heartbeats++
	return e.publishLocked(nil)
}

// Clear empties the cache and publishes AllBlocksCleared.
func (e *Engine) Clear() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	return e.publishLocked(e.cache.Clear())
}

// ResetSeq simulates a restart: the next batch takes Options.SeqStart again.
func (e *Engine) ResetSeq(opt ResetOptions) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq = e.opts.SeqStart
	if opt.ClearCache {
		e.cache.Clear()
	}
	if opt.ClearReplay {
		e.ring.reset()
	}
}

// Contents returns a snapshot of the cache: the ground truth of what this
// (engine, dp rank) holds.
func (e *Engine) Contents() Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cache.Contents()
}

// Stats returns the counters so far.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.NextSeq = e.seq
	s.Blocks = e.cache.Len()
	s.CapacityBlocks = e.opts.CapacityBlocks
	s.Cache = e.cache.Stats()
	return s
}

// publishLocked encodes events as the next batch and sends it.
func (e *Engine) publishLocked(events []Event) error {
	payload, err := e.encode(e.enc, events)
	if err != nil {
		e.stats.PublishErrors++
		return err
	}
	return e.sendLocked(payload, storedBlocks(events))
}

// encode encodes events as one batch of this engine (its dp rank, the
// clock's time) with enc.
func (e *Engine) encode(enc *Encoder, events []Event) ([]byte, error) {
	return enc.Encode(Batch{
		TS:      float64(e.opts.Now().UnixNano()) / 1e9,
		Events:  events,
		DpRank:  e.opts.DpRank,
		NilRank: e.opts.NilRank,
	})
}

// storedBlocks counts the blocks of events' BlockStored events.
func storedBlocks(events []Event) int {
	n := 0
	for _, ev := range events {
		if ev.Kind == EventStored {
			n += len(ev.Hashes)
		}
	}
	return n
}

// sendLocked takes the next seq for an encoded batch holding stored
// blocks, keeps it for replay and sends [topic, seq, payload] unless
// DropSeqs withholds it.
func (e *Engine) sendLocked(payload []byte, stored int) error {
	seq := e.seq
	e.seq++
	e.ring.add(seq, payload)
	if e.opts.DropSeqs != nil && e.opts.DropSeqs(seq) {
		e.stats.Dropped++
		return nil
	}
	msg := zmq4.NewMsgFrom([]byte(e.opts.Topic), seqFrame(seq), payload)
	if err := e.pub.SendMulti(msg); err != nil {
		e.stats.PublishErrors++
		return fmt.Errorf("simengine: publish seq %d: %w", seq, err)
	}
	e.stats.Published++
	e.stats.SentBlocks += uint64(stored)
	return nil
}

// benign drops the errors zmq4's Close reports for connections the peer or
// its reaper already closed.
func benign(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func seqFrame(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

// Close stops the replay goroutine and closes both sockets. It is
// idempotent; later calls return the first call's result.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		e.closed = true
		e.mu.Unlock()
		if e.opts.Linger > 0 {
			time.Sleep(e.opts.Linger)
		}
		var errs []error
		if e.router != nil {
			if err := e.router.Close(); benign(err) != nil {
				errs = append(errs, fmt.Errorf("close replay ROUTER: %w", err))
			}
			<-e.replayDone
		}
		if err := e.pub.Close(); benign(err) != nil {
			errs = append(errs, fmt.Errorf("close PUB: %w", err))
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}
