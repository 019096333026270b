package pinned

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU is what one point cost in CPU time, read from the kernel's per-process
// accounting (user + system, every thread) — figures that stay meaningful on a
// loaded machine, where wall-clock latency measures the neighbours too.
// A figure the harness could not read is 0.
type CPU struct {
	// ServerPerOK is the server's (floor's or router's) CPU per request it
	// answered 200, in µs, over the whole point (warm-up included; the
	// requests it refused or shed cost it too, and count here).
	ServerPerOK float64 `json:"server_us_per_ok"`
	// GeneratorPerSent is this process's (the generator's) CPU per request
	// sent, in µs.
	GeneratorPerSent float64 `json:"generator_us_per_sent"`
	// Server, Generator and Engines are each one's CPU over the point's
	// wall time: the share of a core it used (the generator and the
	// engines share LoadCPU; above ~0.9 together that core is the
	// bottleneck, whatever the server does).
	Server, Generator, Engines float64
}

// cpuClock reads the CPU time used so far by the server, this process and the
// engines.
type cpuClock struct {
	server  int   // pid
	engines []int // pids
}

// cpuReading is one cpuClock reading.
type cpuReading struct {
	at                         time.Time
	server, generator, engines time.Duration
}

func (c cpuClock) read() cpuReading {
	r := cpuReading{at: time.Now(), server: seconds(procCPU(c.server)), generator: selfCPU()}
	for _, pid := range c.engines {
		r.engines += seconds(procCPU(pid))
	}
	return r
}

// seconds is a procCPU figure as a duration (0 when unreadable).
func seconds(s float64) time.Duration {
	if s < 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// cost is the CPU between two readings, for a point that answered ok
// requests 200 and sent sent.
func cost(a, b cpuReading, ok, sent int) CPU {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return CPU{}
	}
	c := CPU{Server: (b.server - a.server).Seconds() / wall, Generator: (b.generator - a.generator).Seconds() / wall,
		Engines: (b.engines - a.engines).Seconds() / wall}
	if ok > 0 {
		c.ServerPerOK = float64((b.server - a.server).Microseconds()) / float64(ok)
	}
	if sent > 0 {
		c.GeneratorPerSent = float64((b.generator - a.generator).Microseconds()) / float64(sent)
	}
	return c
}

// userHZ is the unit of /proc/PID/stat's utime and stime (USER_HZ, 100 on
// every Linux architecture Go runs on).
const userHZ = 100

// procCPU is pid's user + system CPU seconds, every thread, from
// /proc/PID/stat; -1 when unreadable (no /proc, or the process is gone).
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	d, err := parseStatCPU(string(b))
	if err != nil {
		return -1
	}
	return d.Seconds()
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line; the command name (field 2, in parentheses) may hold
// spaces, so fields count from its closing parenthesis.
func parseStatCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("short stat line")
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// selfCPU is this process's user + system time (getrusage, µs resolution).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
