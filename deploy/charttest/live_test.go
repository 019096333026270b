package charttest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// liveMetrics builds kvrouter from this repository, runs `kvrouter serve`
// (HTTP API, OpenAI proxy, endpoint picker, engine signals) over two
// `kvrouter sim` engines with their OpenAI and metrics surface and a third
// one whose serving endpoint refuses connections, sends traffic that touches every path the
// dashboards show (POST /route, streamed completions through the proxy, a
// malformed request, a connection the proxy must retry elsewhere), and
// returns every metric name of its /metrics — each sample's name, and each
// family's from its TYPE line — with the labels its samples carry.
func liveMetrics(t *testing.T) map[string]map[string]bool {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kvrouter")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kvrouter")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the image builds it (Makefile: one build configuration)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kvrouter: %v\n%s", err, out)
	}
	var workers []string
	for i := 1; i <= 3; i++ {
		pub, replay, serving := freePort(t), freePort(t), freePort(t)
		args := []string{"sim", "--endpoint", "tcp://127.0.0.1:" + pub, "--replay-endpoint", "tcp://127.0.0.1:" + replay,
			"--block-size", "16", "--rate", "20", "--seed", fmt.Sprint(i), "--status", "1h"}
		if i < 3 { // worker 3 serves no OpenAI surface: its serving endpoint refuses connections
			args = append(args, "--http", "127.0.0.1:"+serving)
		}
		run(t, bin, args...)
		workers = append(workers, "--worker", fmt.Sprintf("%d=tcp://127.0.0.1:%s,replay=tcp://127.0.0.1:%s,serving=127.0.0.1:%s", i, pub, replay, serving))
	}
	// Engine signals scrape the simulated engines' vLLM metrics (worker 3's
	// serving endpoint refuses, so its scrapes fail: never stale within the
	// test, so it stays routable for the proxy's retry).
	workers = append(workers, "--engine-signals", "--signals-interval", "100ms", "--signals-stale-after", "1h", "--health-checks")
	api, proxy := "127.0.0.1:"+freePort(t), "http://127.0.0.1:"+freePort(t)
	run(t, bin, append([]string{"serve", "--http", api, "--block-size", "16", "--proxy-listen", strings.TrimPrefix(proxy, "http://"),
		"--epp-listen", "127.0.0.1:" + freePort(t), "--epp-health-listen", "127.0.0.1:" + freePort(t), "--proxy-attempts", "3"}, workers...)...)
	api = "http://" + api
	waitFor(t, "the router and both engines' events", func() error {
		body, err := get(api + "/workers")
		if err != nil {
			return err
		}
		if strings.Count(body, `"state":"exact"`) != 3 || strings.Contains(body, `"last_seq":null`) {
			return fmt.Errorf("want 3 exact ranks with events: %s", body)
		}
		return nil
	})
	prompt := func(i int) string {
		ids := make([]string, 40)
		for j := range ids {
			ids[j] = fmt.Sprint(i*100 + j%(10+i))
		}
		return "[" + strings.Join(ids, ",") + "]"
	}
	for i := range 4 {
		mustPost(t, api+"/route", fmt.Sprintf(`{"token_ids":%s,"model_name":"default","include_scores":true}`, prompt(i)), http.StatusOK)
	}
	mustPost(t, proxy+"/v1/completions", `{"model":"default","prompt":`, http.StatusBadRequest) // malformed: refused
	for i := range 6 {
		mustPost(t, proxy+"/v1/completions", fmt.Sprintf(`{"model":"default","prompt":%s,"max_tokens":3,"stream":true}`, prompt(i)), http.StatusOK)
	}
	var text string
	waitFor(t, "the engines' prefix-cache counters relayed", func() error {
		var err error
		if text, err = get(api + "/metrics"); err != nil {
			return err
		}
		if !strings.Contains(text, "kvrouter_engine_reported_prefix_cache_tokens_total{") {
			return fmt.Errorf("no engine prefix-cache counters yet")
		}
		return nil
	})
	return exposition(text)
}

// exposition reads the Prometheus text format: metric name → label names.
func exposition(text string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			if out[f[2]] == nil {
				out[f[2]] = map[string]bool{}
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if i := strings.IndexByte(name, ' '); i >= 0 {
			name, rest = name[:i], ""
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, kv := range strings.Split(rest, `",`) {
			if k, _, ok := strings.Cut(kv, `="`); ok {
				out[name][strings.TrimSpace(k)] = true
			}
		}
	}
	return out
}

func TestExpositionReader(t *testing.T) {
	got := exposition("# HELP a_total x\n# TYPE a_total counter\na_total{worker=\"1\",reason=\"a,b\"} 3\nb 1\n# TYPE c gauge\n")
	if len(got) != 3 || !got["a_total"]["worker"] || !got["a_total"]["reason"] || len(got["a_total"]) != 2 || len(got["b"]) != 0 || got["c"] == nil {
		t.Errorf("%v", got)
	}
}

// run starts the binary until the test ends; its output is shown if the
// test fails.
func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			s := out.String()
			t.Logf("kvrouter %s output (last 3 KiB):\n%s", args[0], s[max(0, len(s)-3072):])
		}
	})
}

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

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b), err
}

func mustPost(t *testing.T, url, body string, want int) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %s %s, want %d", url, resp.Status, b, want)
	}
}

// waitFor polls cond until it holds (a process starting, events
// arriving); the bound is only for a process that never gets there.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
