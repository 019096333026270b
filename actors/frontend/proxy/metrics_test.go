package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/telemetry"
	"go.opentelemetry.io/otel/metric"
)

// testMetrics is a process's metrics (its /metrics handler), shut down
// with the test.
func testMetrics(t *testing.T) *telemetry.Metrics {
	t.Helper()
	m, err := telemetry.NewMetrics(telemetry.Pipelines(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// proxyMeter is the proxy's meter of m.
func proxyMeter(m *telemetry.Metrics) metric.Meter {
	return m.Meter("github.com/kvrouter/kvrouter/actors/frontend/proxy")
}

// scrape is one Prometheus text scrape of m.
func scrape(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// series returns the value of the first series named name whose labels
// include every one of labels (`worker="1"`), or -1 when there is none.
func series(text, name string, labels ...string) float64 {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	for _, line := range strings.Split(text, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(","+m[1]+",", ","+l+",")
		}
		if all {
			v, _ := strconv.ParseFloat(m[2], 64)
			return v
		}
	}
	return -1
}

// The proxy's instruments reach /metrics under the documented names and
// labels, per worker: time to first token, inter-token latency and the
// request's duration (with its status) for the worker that served a
// streamed answer; a request the proxy answers itself is counted by
// reason. A request without x-request-id gets one.
func TestProxyMetricsPerWorker(t *testing.T) {
	m := testMetrics(t)
	release := make(chan struct{})
	// The engine holds its answer after the first token until the client
	// has read it: the rest comes as a later chunk (an inter-token gap).
	f := newFleet(t, 1, func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-release:
		}
	}, Options{Meter: proxyMeter(m)})
	ctx := context.Background()
	resp, err := f.post(ctx, "/v1/completions", `{"model":"m","stream":true,"prompt":`+tokens(4, 8)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	close(release)
	_, _ = io.Copy(io.Discard, rd)
	resp.Body.Close()
	if id := resp.Header.Get(RequestIDHeader); !strings.HasPrefix(id, "kvr-") {
		t.Errorf("x-request-id %q: want one created for a request that sent none", id)
	}
	resp, err = f.post(ctx, "/v1/completions", `{"model":"nope","prompt":[1]}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	f.idle()

	worker := []string{`worker="1"`, `dp_rank="0"`}
	waitFor(t, "the proxy's series on /metrics", func() (bool, any) {
		text := scrape(t, m)
		ok := series(text, "kvrouter_proxy_time_to_first_token_seconds_count", worker...) == 1 &&
			series(text, "kvrouter_proxy_inter_token_latency_seconds_count", worker...) >= 1 &&
			series(text, "kvrouter_proxy_request_duration_seconds_count", append(worker, `status="200"`)...) == 1 &&
			series(text, "kvrouter_proxy_refused_total", `reason="unknown_namespace"`) == 1
		return ok, text
	})
}
