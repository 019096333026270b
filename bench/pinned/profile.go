package pinned

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"
)

// profiler takes one CPU profile of the router process (Config.RouterProfile)
// from its serve --pprof-listen endpoint.
type profiler struct {
	addr  string // serve's --pprof-listen
	taken bool   // the profile was started
}

// profiler returns the router's profiler for the first ingest rate, nil
// when no profile is asked for, at a later ingest rate, or when no port
// is free.
func (r *runner) profiler() *profiler {
	if r.cfg.RouterProfile == "" || r.profiled {
		return nil
	}
	r.profiled = true
	addrs, err := freeAddrs(1)
	if err != nil {
		r.progress("router cpu profile: %v", err)
		return nil
	}
	return &profiler{addr: addrs[0]}
}

// during starts the profile when rate is the profiled point's and none
// was taken yet: after the point's warm-up, over its measured duration.
// The returned func (nil when no profile started) waits for it and says
// how it went.
func (p *profiler) during(cfg Config, rate float64) func() error {
	if p == nil || p.taken || rate != cfg.ProfileRate {
		return nil
	}
	p.taken = true
	errc := make(chan error, 1)
	go func() {
		time.Sleep(cfg.Warmup) // the harness, not a test: the profile starts with the measured part
		errc <- fetchProfile("http://"+p.addr, cfg.Duration, cfg.RouterProfile)
	}()
	return func() error { return <-errc }
}

// fetchProfile writes base's CPU profile over d (whole seconds, at least
// one) to file.
func fetchProfile(base string, d time.Duration, file string) error {
	secs := max(1, int(math.Round(d.Seconds())))
	c := http.Client{Timeout: time.Duration(secs)*time.Second + 30*time.Second}
	resp, err := c.Get(base + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
