package enginesignals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kvrouter/kvrouter/messages"
)

// Config configures a Scraper. Zero fields keep their defaults.
type Config struct {
	// Interval between two scrapes of one endpoint (default
	// DefaultInterval).
	Interval time.Duration
	// Timeout bounds one scrape, connection to last byte (default
	// DefaultTimeout).
	Timeout time.Duration
	// StaleAfter: a rank with no successful scrape for this long has stale
	// signals, and is saturated (default DefaultStaleAfter).
	StaleAfter time.Duration
	// MaxBytes caps one exposition (default DefaultMaxBytes); a larger
	// one fails with ReasonTooLarge.
	MaxBytes int64
	// Client sends the requests (nil: a client of its own that keeps
	// connections alive and does not ask for gzip).
	Client *http.Client
}

// Defaults (README.md, "Defaults": why these).
const (
	DefaultInterval   = 250 * time.Millisecond
	DefaultTimeout    = time.Second
	DefaultStaleAfter = 2 * time.Second
	DefaultMaxBytes   = 4 << 20
)

// WithDefaults returns c with zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Client == nil {
		c.Client = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second,
			// The engines answer plain text in a few hundred kB; inflating
			// gzip would cost the router more CPU than the bytes cost the
			// network inside a cluster.
			DisableCompression: true,
		}}
	}
	return c
}

// Target is one rank to scrape: its metrics URL and engine choice.
type Target struct {
	Key    messages.WorkerKey
	URL    string
	Engine string
}

// Observation is what the Scraper knows of one target.
type Observation struct {
	Target
	// Signals are from the last successful scrape (zero before one).
	Signals Signals
	// Seq counts the successful scrapes; At is the time of the last one
	// (zero: none yet), Since when the target was added.
	Seq       uint64
	At, Since time.Time
	// Failures counts the failed scrapes by reason (Reasons' order);
	// LastError is the latest failure ("" after a success).
	Failures  [len(Reasons)]uint64
	LastError string
	// StaleEvents counts the times the signals went stale.
	StaleEvents uint64
	stale       bool
}

// Stale reports whether the observation is older than after at now: no
// successful scrape for that long (counted from when the target was added
// until the first one).
func (o *Observation) Stale(now time.Time, after time.Duration) bool {
	ref := o.At
	if ref.IsZero() {
		ref = o.Since
	}
	return now.Sub(ref) > after
}

// FailuresOf is the failed scrapes of reason r.
func (o *Observation) FailuresOf(r Reason) uint64 {
	for i, x := range Reasons {
		if x == r {
			return o.Failures[i]
		}
	}
	return 0
}

// Failed is the failed scrapes of every reason.
func (o *Observation) Failed() uint64 {
	var n uint64
	for _, f := range o.Failures {
		n += f
	}
	return n
}

// Scraper polls the metrics of a set of ranks: one goroutine per target
// (the I/O edge), each with its own Extractor; their latest observations
// are read with Snapshot. Safe for concurrent use.
type Scraper struct {
	cfg Config

	mu      sync.Mutex
	targets map[messages.WorkerKey]*poller
	closed  bool
	wg      sync.WaitGroup
}

type poller struct {
	stop chan struct{}
	obs  Observation // under Scraper.mu
}

// NewScraper returns a Scraper with no target.
func NewScraper(cfg Config) *Scraper {
	return &Scraper{cfg: cfg.WithDefaults(), targets: map[messages.WorkerKey]*poller{}}
}

// Config returns the configuration with defaults applied.
func (s *Scraper) Config() Config { return s.cfg }

// Set makes targets the ranks scraped: new ones start (their staleness
// counted from now), gone ones stop, and a target whose URL or engine
// changed starts afresh.
func (s *Scraper) Set(targets []Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	keep := make(map[messages.WorkerKey]bool, len(targets))
	for _, t := range targets {
		keep[t.Key] = true
		if p, ok := s.targets[t.Key]; ok {
			if p.obs.Target == t {
				continue
			}
			close(p.stop)
		}
		p := &poller{stop: make(chan struct{}), obs: Observation{Target: t, Since: time.Now()}}
		s.targets[t.Key] = p
		s.wg.Add(1)
		go s.poll(p)
	}
	for k, p := range s.targets {
		if !keep[k] {
			close(p.stop)
			delete(s.targets, k)
		}
	}
}

// Snapshot returns a copy of every target's observation.
func (s *Scraper) Snapshot() map[messages.WorkerKey]Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[messages.WorkerKey]Observation, len(s.targets))
	for k, p := range s.targets {
		out[k] = p.obs
	}
	return out
}

// Close stops every poller and waits for them.
func (s *Scraper) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for k, p := range s.targets {
			close(p.stop)
			delete(s.targets, k)
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// poll scrapes one target every Interval until it is stopped.
func (s *Scraper) poll(p *poller) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-p.stop
		cancel()
	}()
	var x Extractor
	var body []byte
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		var sig Signals
		var err error
		body, err = s.fetch(ctx, p.obs.URL, body[:0])
		if err == nil {
			sig, err = x.Extract(body, p.obs.Engine, int(p.obs.Key.DpRank))
		}
		if ctx.Err() != nil {
			return
		}
		s.record(p, sig, err, time.Now())
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// record files one scrape's outcome.
func (s *Scraper) record(p *poller, sig Signals, err error, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &p.obs
	if err == nil {
		o.Signals, o.At, o.LastError, o.stale = sig, now, "", false
		o.Seq++
		return
	}
	for i, r := range Reasons {
		if r == ReasonOf(err) {
			o.Failures[i]++
		}
	}
	o.LastError = err.Error()
	if !o.stale && o.Stale(now, s.cfg.StaleAfter) {
		o.stale = true
		o.StaleEvents++
	}
}

// fetch GETs url into buf, at most MaxBytes.
func (s *Scraper) fetch(ctx context.Context, url string, buf []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return buf, fail(ReasonUnreachable, "%v", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return buf, transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return buf, fail(ReasonStatus, "GET %s: %s", url, resp.Status)
	}
	w := byteWriter{buf: buf}
	n, err := io.Copy(&w, io.LimitReader(resp.Body, s.cfg.MaxBytes+1))
	if err != nil {
		return w.buf, transportError(err)
	}
	if n > s.cfg.MaxBytes {
		return w.buf, fail(ReasonTooLarge, "GET %s: more than %d bytes", url, s.cfg.MaxBytes)
	}
	return w.buf, nil
}

func transportError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Reason: ReasonTimeout, Err: err}
	}
	return &Error{Reason: ReasonUnreachable, Err: fmt.Errorf("%w", err)}
}

// byteWriter appends to a reused buffer.
type byteWriter struct{ buf []byte }

func (w *byteWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}
