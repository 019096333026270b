package pinned

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pinning places processes on cores with taskset, or leaves them where
// the scheduler puts them when taskset is missing.
type pinning struct {
	taskset string // "" when unpinned
}

// newPinning finds taskset; pin false (or taskset missing) runs unpinned.
func newPinning(pin bool) (pinning, string) {
	if !pin {
		return pinning{}, "unpinned (--pin=false)"
	}
	p, err := exec.LookPath("taskset")
	if err != nil {
		return pinning{}, "UNPINNED: taskset (util-linux) not found; router, engines and generator share every core"
	}
	return pinning{taskset: p}, ""
}

// argv prefixes a command with taskset -c cpu.
func (p pinning) argv(cpu int, argv []string) []string {
	if p.taskset == "" {
		return argv
	}
	return append([]string{p.taskset, "-c", strconv.Itoa(cpu)}, argv...)
}

// self pins every thread of this process (the generator) to cpu; threads
// started later inherit it.
func (p pinning) self(cpu int) error {
	if p.taskset == "" {
		return nil
	}
	out, err := exec.Command(p.taskset, "-a", "-p", "-c", strconv.Itoa(cpu), strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset on the generator: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setNice gives this process, and what it starts, nice value n (0: left
// as is); restore puts its session's autogroup back. Linux keeps a nice
// value per thread (threads and processes started later inherit their
// creator's), and with autogroup scheduling (sched_autogroup_enabled, the
// default) nice ranks tasks only within their session: between sessions
// the scheduler shares each core fairly, so a job in another terminal
// gets as much as the whole harness. setNice sets every thread's nice and
// the autogroup's (/proc/self/autogroup) — that of the session the
// harness runs in, shared with whatever else runs there, until restore.
func setNice(n int) (restore func(), err error) {
	restore = func() {}
	if n == 0 {
		return restore, nil
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return restore, fmt.Errorf("nice %d: %w", n, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
			return restore, fmt.Errorf("nice %d: %w (a negative nice needs CAP_SYS_NICE)", n, err)
		}
	}
	const ag = "/proc/self/autogroup"
	b, err := os.ReadFile(ag)
	if err != nil {
		return restore, nil // no autogroup scheduling: the threads' nice is all
	}
	was, in, err := autogroupNice(b)
	if err != nil {
		return restore, fmt.Errorf("nice %d: %s: %w", n, ag, err)
	}
	if !in {
		return restore, nil
	}
	if err := os.WriteFile(ag, []byte(strconv.Itoa(n)), 0); err != nil {
		return restore, fmt.Errorf("nice %d: the session's autogroup: %w", n, err)
	}
	return func() { _ = os.WriteFile(ag, []byte(was), 0) }, nil
}

// autogroupNice reads /proc/self/autogroup's content: "/autogroup-5 nice 0"
// gives the autogroup's nice value; an empty file means the process is
// scheduled in a cgroup's group rather than an autogroup (a container, a
// systemd unit with the cpu controller), where the threads' nice is all
// that ranks them, so in is false.
func autogroupNice(b []byte) (nice string, in bool, err error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", false, nil
	}
	if len(f) != 3 || f[1] != "nice" {
		return "", false, fmt.Errorf("unexpected content %q", b)
	}
	if _, err := strconv.Atoi(f[2]); err != nil {
		return "", false, fmt.Errorf("unexpected content %q", b)
	}
	return f[2], true, nil
}

// proc is a child process whose stderr lines go to onLine (and whose last
// lines are kept for an error message).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	tail []string
}

// startProc starts argv; onLine, when set, sees each stderr line.
func startProc(name string, argv []string, onLine func(string)) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	// A harness that dies takes its children with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if onLine != nil {
				onLine(line)
			}
			p.mu.Lock()
			p.tail = append(p.tail[max(0, len(p.tail)-7):], line)
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = p.cmd.Wait()
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// lastLines is the end of its stderr, for error messages.
func (p *proc) lastLines() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// stop sends SIGTERM and waits; past 5 s it kills.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freeAddrs returns n loopback addresses with ports free a moment ago.
func freeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// waitFor polls cond every 50 ms until it holds, the process exits or
// timeout passes; the error carries cond's last word and the process's
// last stderr lines.
func waitFor(ctx context.Context, p *proc, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		switch {
		case ok:
			return nil
		case p.exited():
			return fmt.Errorf("%s exited waiting for %s (%s):\n%s", p.name, what, last, p.lastLines())
		case time.Now().After(deadline):
			return fmt.Errorf("%s: no %s after %v (%s)", p.name, what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// getOK fetches url and reports whether it answered 200, and the body.
func getOK(url string) (bool, []byte) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	return resp.StatusCode == http.StatusOK, b
}

// rankState is the part of a /workers rank the harness reads.
type rankState struct {
	State  string `json:"state"`
	Blocks int    `json:"blocks"`
}

// workerRanks reads /workers: every rank's state and blocks.
func workerRanks(base string) ([]rankState, error) {
	ok, b := getOK(base + "/workers")
	if !ok {
		return nil, errors.New(strings.TrimSpace(string(b)))
	}
	var ws []struct {
		Ranks []rankState `json:"ranks"`
	}
	if err := json.Unmarshal(b, &ws); err != nil {
		return nil, err
	}
	var out []rankState
	for _, w := range ws {
		out = append(out, w.Ranks...)
	}
	return out, nil
}

// counterSum sums the samples of the Prometheus counters named in names
// on base's /metrics (every label set).
func counterSum(base string, names ...string) (float64, error) {
	sums, err := counterSums(base, names...)
	var sum float64
	for _, v := range sums {
		sum += v
	}
	return sum, err
}

// counterSums is each named counter's sum over its label sets, from one
// scrape of base's /metrics (0 for a name without samples).
func counterSums(base string, names ...string) (map[string]float64, error) {
	ok, b := getOK(base + "/metrics")
	if !ok {
		return nil, fmt.Errorf("/metrics: %s", strings.TrimSpace(string(b)))
	}
	sums := make(map[string]float64, len(names))
	for line := range strings.Lines(string(b)) {
		for _, n := range names {
			if rest, ok := strings.CutPrefix(line, n); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
				f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
				if len(f) > 0 {
					v, err := strconv.ParseFloat(f[0], 64)
					if err == nil {
						sums[n] += v
					}
				}
			}
		}
	}
	return sums, nil
}
