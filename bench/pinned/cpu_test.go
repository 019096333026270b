package pinned

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// utime and stime are fields 14 and 15, counted past the command name,
// which may hold spaces and parentheses.
func TestParseStatCPU(t *testing.T) {
	line := "4242 (kv router (x)) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 9 0 1000 1 1 18446744073709551615"
	d, err := parseStatCPU(line)
	if err != nil || d != 3250*time.Millisecond {
		t.Fatalf("got %v, %v; want 3.25s (325 ticks)", d, err)
	}
	if _, err := parseStatCPU("4242 (short) S 1 2"); err == nil {
		t.Error("a short line parsed")
	}
}

// This process's CPU from /proc and from getrusage agree within /proc's
// 10 ms ticks, once it has spent some.
func TestProcCPUReadsThisProcess(t *testing.T) {
	a := selfCPU()
	for x := 0; selfCPU()-a < 50*time.Millisecond; x++ {
		_ = x * x
	}
	p, s := seconds(procCPU(os.Getpid())), selfCPU()
	if p < 50*time.Millisecond || p > s+20*time.Millisecond || p < s-20*time.Millisecond {
		t.Errorf("/proc says %v, getrusage %v", p, s)
	}
}

// cost divides each process's CPU by the point's wall time and the
// server's by the requests answered 200.
func TestCost(t *testing.T) {
	t0 := time.Now()
	a := cpuReading{at: t0, server: time.Second, generator: 2 * time.Second, engines: 0}
	b := cpuReading{at: t0.Add(2 * time.Second), server: 2 * time.Second, generator: 3 * time.Second, engines: time.Second}
	c := cost(a, b, 10_000, 20_000)
	if c.ServerPerOK != 100 || c.GeneratorPerSent != 50 || c.Server != 0.5 || c.Generator != 0.5 || c.Engines != 0.5 {
		t.Errorf("%+v", c)
	}
	if c := cost(a, b, 0, 0); c.ServerPerOK != 0 || c.GeneratorPerSent != 0 {
		t.Errorf("nothing answered: %+v", c)
	}
}

// setNice gives every thread of the process, and its session's autogroup,
// the nice value (run in a child process in a session of its own: a
// raised nice value cannot be lowered again unprivileged).
func TestSetNiceEveryThread(t *testing.T) {
	if os.Getenv("PINNED_NICE_CHILD") == "1" {
		restore, err := setNice(7)
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
			if err != nil {
				continue // the thread ended
			}
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); f[16] != "7" { // field 19: nice
				t.Errorf("thread %s at nice %s", task.Name(), f[16])
			}
		}
		if b, err := os.ReadFile("/proc/self/autogroup"); err == nil && len(strings.TrimSpace(string(b))) > 0 && !strings.HasSuffix(strings.TrimSpace(string(b)), " nice 7") {
			t.Errorf("autogroup: %s", b)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSetNiceEveryThread$", "-test.v")
	cmd.Env = append(os.Environ(), "PINNED_NICE_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own session, so its own autogroup
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Errorf("child: %v\n%s", err, out)
	}
}

// /proc/self/autogroup's content: an autogroup's nice value, an empty file
// (scheduled in a cgroup's group: no autogroup to set) and what is neither.
func TestAutogroupNice(t *testing.T) {
	for _, c := range []struct {
		in       string
		nice     string
		grouped  bool
		wantsErr bool
	}{
		{"/autogroup-5 nice 0\n", "0", true, false},
		{"/autogroup-12 nice -3", "-3", true, false},
		{"", "", false, false},
		{"\n", "", false, false},
		{"/autogroup-5 weight 0", "", false, true},
		{"/autogroup-5 nice x", "", false, true},
	} {
		nice, grouped, err := autogroupNice([]byte(c.in))
		if nice != c.nice || grouped != c.grouped || (err != nil) != c.wantsErr {
			t.Errorf("%q: (%q, %v, %v), want (%q, %v, error %v)", c.in, nice, grouped, err, c.nice, c.grouped, c.wantsErr)
		}
	}
}
