package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kvrouter/kvrouter/actors/coalescer"
	"github.com/kvrouter/kvrouter/actors/expiry"
	"github.com/kvrouter/kvrouter/actors/indexer"
	"github.com/kvrouter/kvrouter/actors/indexer/radix"
	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/actors/normalizer"
	"github.com/kvrouter/kvrouter/actors/sessions"
	"github.com/kvrouter/kvrouter/actors/telemetry/metricstest"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/wire"
	dto "github.com/prometheus/client_model/go"
)

// fakePipeline serves fixed counters, changed by the test between scrapes.
type fakePipeline struct {
	status    coalescer.Status
	listeners map[messages.StreamID]*listener.Stats
	sockets   map[string]*listener.Stats // shared by topic, by endpoint
	norm      map[messages.StreamID]normalizer.Stats
	lost      map[messages.StreamID]uint64
	index     indexer.Stats
	sessions  sessions.Stats
	down      bool // every request fails
}

var errDown = errors.New("actor did not answer")

func (f *fakePipeline) Status(time.Duration) (*coalescer.Status, error) {
	if f.down {
		return nil, errDown
	}
	return &f.status, nil
}

func (f *fakePipeline) ListenerStats(s messages.StreamID, _ time.Duration) (*listener.Stats, error) {
	ls, ok := f.listeners[s]
	if !ok || f.down {
		return nil, errDown
	}
	return ls, nil
}

func (f *fakePipeline) SharedSocketStats(time.Duration) (map[string]*listener.Stats, error) {
	if f.down {
		return nil, errDown
	}
	return f.sockets, nil
}

func (f *fakePipeline) NormalizerStats(s messages.StreamID, _ time.Duration) (*normalizer.PoolStats, error) {
	if f.down {
		return nil, errDown
	}
	return &normalizer.PoolStats{Stream: f.norm[s], StreamHistoryLost: f.lost[s]}, nil
}

func (f *fakePipeline) IndexStats(time.Duration) (*indexer.Stats, error) {
	if f.down {
		return nil, errDown
	}
	return &f.index, nil
}

func (f *fakePipeline) SessionStats(time.Duration) (*sessions.Stats, error) {
	if f.down {
		return nil, errDown
	}
	return &f.sessions, nil
}

var w7 = messages.StreamID{Worker: 7, DpRank: 1}

// sharedEndpoint is the fake's socket shared by topic.
const sharedEndpoint = "tcp://0.0.0.0:5557"

func newFake() *fakePipeline {
	f := &fakePipeline{
		status: coalescer.Status{Streams: map[messages.StreamID]coalescer.StreamStatus{
			w7: {State: coalescer.StateExact, Lag: 3 * time.Millisecond}}},
		listeners: map[messages.StreamID]*listener.Stats{w7: {Delivered: 5, Gaps: 1, Recoveries: 2, Connected: true, Subscribed: 1,
			BadFrames: map[string]uint64{"topic": 3, "socket: dial tcp 10.0.0.5:5557: connection refused": 1, "socket: EOF": 2},
			Replays:   map[string]uint64{"ok": 2}, Resyncs: map[string]uint64{"start": 1}}},
		sockets: map[string]*listener.Stats{sharedEndpoint: {
			BadFrames: map[string]uint64{"unknown_pod": 2, "too_many_streams": 1, "socket: EOF": 5}}},
		norm:     map[messages.StreamID]normalizer.Stats{w7: {}},
		lost:     map[messages.StreamID]uint64{w7: 4},
		index:    indexer.Stats{Shards: []radix.Size{{Blocks: 10}, {Blocks: 4}}, StoredBlocks: 70, ShardStoredBlocks: []uint64{50, 20}},
		sessions: sessions.Stats{Sessions: 3, Lineages: 4, Blocks: 40},
	}
	f.sessions.Reasons[sessions.ReasonEvicted] = 6
	f.sessions.Reasons[sessions.ReasonUnknownParent] = 2
	n := f.norm[w7]
	n.Accepted[messages.KindStored] = 8
	n.Rejected[messages.ReasonUnknownTag] = 3
	n.DroppedHints[wire.HintSessionID] = 2
	f.norm[w7] = n
	return f
}

// scrape GETs the metrics' handler and parses the Prometheus text it serves.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeHandler(t, m.Handler())
}

// scrapeHandler GETs h and parses the Prometheus text it serves.
func scrapeHandler(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return metricstest.Parse(t, rec.Body)
}

// value returns the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := metricstest.Sample(fams, name, want)
	if !ok {
		t.Fatalf("no %s sample with labels %v", name, want)
	}
	return v
}

func newMetrics(t *testing.T, pipes ...Pipeline) *Metrics {
	t.Helper()
	m, err := NewMetrics(Pipelines(pipes), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

func TestMetricNames(t *testing.T) {
	m := newMetrics(t, newFake())
	m.RecordRoute(context.Background(), 300*time.Microsecond, 32, 64)
	fams := scrape(t, m)
	want := map[string]dto.MetricType{
		"kvrouter_events_total":                         dto.MetricType_COUNTER,
		"kvrouter_dropped_hints_total":                  dto.MetricType_COUNTER,
		"kvrouter_batches_total":                        dto.MetricType_COUNTER,
		"kvrouter_seq_gaps_total":                       dto.MetricType_COUNTER,
		"kvrouter_replays_total":                        dto.MetricType_COUNTER,
		"kvrouter_resyncs_total":                        dto.MetricType_COUNTER,
		"kvrouter_recoveries_total":                     dto.MetricType_COUNTER,
		"kvrouter_history_lost_batches_total":           dto.MetricType_COUNTER,
		"kvrouter_dropped_messages_total":               dto.MetricType_COUNTER,
		"kvrouter_shared_socket_refused_messages_total": dto.MetricType_COUNTER,
		"kvrouter_mailbox_depth":                        dto.MetricType_GAUGE,
		"kvrouter_route_expired_total":                  dto.MetricType_COUNTER,
		"kvrouter_session_events_total":                 dto.MetricType_COUNTER,
		"kvrouter_sessions_dropped_total":               dto.MetricType_COUNTER,
		"kvrouter_session_lineages_dropped_total":       dto.MetricType_COUNTER,
		"kvrouter_session_blocks_dropped_total":         dto.MetricType_COUNTER,
		"kvrouter_sessions":                             dto.MetricType_GAUGE,
		"kvrouter_session_lineages":                     dto.MetricType_GAUGE,
		"kvrouter_session_blocks":                       dto.MetricType_GAUGE,
		"kvrouter_telemetry_read_errors_total":          dto.MetricType_COUNTER,
		"kvrouter_stream_lag_seconds":                   dto.MetricType_GAUGE,
		"kvrouter_worker_state":                         dto.MetricType_GAUGE,
		"kvrouter_index_blocks":                         dto.MetricType_GAUGE,
		"kvrouter_index_stored_blocks_total":            dto.MetricType_COUNTER,
		"kvrouter_route_duration_seconds":               dto.MetricType_HISTOGRAM,
		"kvrouter_route_cached_tokens_ratio":            dto.MetricType_HISTOGRAM,
	}
	var got []string
	for name, fam := range fams {
		if !strings.HasPrefix(name, "kvrouter_") {
			continue // the Go and process collectors' series: TestGoAndProcessMetrics
		}
		got = append(got, name)
		if fam.GetType() != want[name] {
			t.Errorf("%s is a %v, want %v", name, fam.GetType(), want[name])
		}
	}
	sort.Strings(got)
	if len(got) != len(want) {
		t.Errorf("metrics %v, want exactly %d: %v", got, len(want), want)
	}
}

// TestGoAndProcessMetrics checks that /metrics carries the standard Go
// runtime and process series dashboards expect, from the same registry.
func TestGoAndProcessMetrics(t *testing.T) {
	fams := scrape(t, newMetrics(t, newFake()))
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds",
		"process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total"} {
		fam, ok := fams[name]
		if !ok || len(fam.GetMetric()) == 0 {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if v := value(t, fams, "go_goroutines", nil); v < 1 {
		t.Errorf("go_goroutines = %v, want at least 1", v)
	}
	if v := value(t, fams, "process_resident_memory_bytes", nil); v <= 0 {
		t.Errorf("process_resident_memory_bytes = %v, want > 0", v)
	}
}

func TestCountersFollowThePipeline(t *testing.T) {
	f := newFake()
	m := newMetrics(t, f)
	stream := map[string]string{"worker": "7", "dp_rank": "1"}
	with := func(kv ...string) map[string]string {
		l := map[string]string{"worker": "7", "dp_rank": "1"}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	fams := scrape(t, m)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kvrouter_events_total", with("kind", "stored", "outcome", "accepted"), 8},
		{"kvrouter_events_total", with("outcome", "rejected", "reason", "unknown_tag"), 3},
		{"kvrouter_dropped_hints_total", with("reason", "invalid_session_id"), 2},
		{"kvrouter_batches_total", stream, 5},
		{"kvrouter_seq_gaps_total", stream, 1},
		{"kvrouter_replays_total", with("result", "ok"), 2},
		{"kvrouter_resyncs_total", with("reason", "start"), 1},
		{"kvrouter_recoveries_total", stream, 2},
		{"kvrouter_history_lost_batches_total", stream, 4},
		{"kvrouter_dropped_messages_total", with("reason", "topic"), 3},
		{"kvrouter_dropped_messages_total", with("reason", "socket_error"), 3},
		{"kvrouter_shared_socket_refused_messages_total", map[string]string{"endpoint": sharedEndpoint, "reason": "unknown_pod"}, 2},
		{"kvrouter_shared_socket_refused_messages_total", map[string]string{"endpoint": sharedEndpoint, "reason": "too_many_streams"}, 1},
		{"kvrouter_mailbox_depth", map[string]string{"actor": "index"}, 0},
		{"kvrouter_sessions", nil, 3},
		{"kvrouter_session_lineages", nil, 4},
		{"kvrouter_session_blocks", nil, 40},
		{"kvrouter_sessions_dropped_total", map[string]string{"reason": "evicted"}, 6},
		{"kvrouter_sessions_dropped_total", map[string]string{"reason": "expired"}, 0},
		{"kvrouter_session_events_total", map[string]string{"reason": "unknown_parent"}, 2},
		{"kvrouter_session_events_total", map[string]string{"reason": "cycle"}, 0},
		{"kvrouter_stream_lag_seconds", stream, 0.003},
		{"kvrouter_worker_state", with("state", "exact"), 1},
		{"kvrouter_worker_state", with("state", "degraded"), 0},
		{"kvrouter_index_blocks", map[string]string{"shard": "0"}, 10},
		{"kvrouter_index_blocks", map[string]string{"shard": "1"}, 4},
		{"kvrouter_index_stored_blocks_total", map[string]string{"shard": "0"}, 50},
		{"kvrouter_index_stored_blocks_total", map[string]string{"shard": "1"}, 20},
		{"kvrouter_telemetry_read_errors_total", nil, 0},
	}
	for _, c := range checks {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// A shared socket's socket errors are in each pod's dropped messages
	// already, not counted twice.
	if n := len(fams["kvrouter_shared_socket_refused_messages_total"].GetMetric()); n != 2 {
		t.Errorf("shared socket refusals: %d series, want unknown_pod and too_many_streams only", n)
	}

	// More events flow; a replay times out and the stream resyncs, degraded.
	n := f.norm[w7]
	n.Accepted[messages.KindStored] += 4
	n.Rejected[messages.ReasonBlockSizeMismatch] = 2
	f.norm[w7] = n
	ls := f.listeners[w7]
	ls.Delivered, ls.Replays["timeout"], ls.Resyncs["replay_timeout"] = 9, 1, 1
	f.status.Streams[w7] = coalescer.StreamStatus{State: coalescer.StateDegraded}
	fams = scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kvrouter_events_total", with("kind", "stored", "outcome", "accepted"), 12},
		{"kvrouter_events_total", with("outcome", "rejected", "reason", "block_size_mismatch"), 2},
		{"kvrouter_events_total", with("outcome", "rejected", "reason", "unknown_tag"), 3},
		{"kvrouter_batches_total", stream, 9},
		{"kvrouter_replays_total", with("result", "timeout"), 1},
		{"kvrouter_resyncs_total", with("reason", "replay_timeout"), 1},
		{"kvrouter_worker_state", with("state", "exact"), 0},
		{"kvrouter_worker_state", with("state", "degraded"), 1},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("after more events: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	// A running replay reports the stream recovering.
	ls.Replaying = true
	if got := value(t, scrape(t, m), "kvrouter_worker_state", with("state", "recovering")); got != 1 {
		t.Errorf("replaying stream: recovering = %v, want 1", got)
	}
}

func TestPipelinesAreSummedAndFailuresCounted(t *testing.T) {
	a, b, down := newFake(), newFake(), newFake()
	down.down = true
	m := newMetrics(t, a, b, down)
	fams := scrape(t, m)
	if got := value(t, fams, "kvrouter_index_blocks", map[string]string{"shard": "0"}); got != 20 {
		t.Errorf("shard 0 blocks over two pipelines = %v, want 20", got)
	}
	if got := value(t, fams, "kvrouter_batches_total", map[string]string{"worker": "7"}); got != 10 {
		t.Errorf("batches over two pipelines = %v, want 10", got)
	}
	// The pipeline that does not answer costs its Status, SharedSocketStats,
	// IndexStats and SessionStats.
	if got := value(t, fams, "kvrouter_telemetry_read_errors_total", nil); got != 4 {
		t.Errorf("read errors = %v, want 4", got)
	}
}

func TestRouteHistograms(t *testing.T) {
	m := newMetrics(t)
	ctx := context.Background()
	m.RecordRoute(ctx, 80*time.Microsecond, 48, 64)
	m.RecordRoute(ctx, 2*time.Millisecond, 0, 64)
	m.RecordRoute(ctx, time.Millisecond, 0, 0) // no prompt tokens: no ratio
	fams := scrape(t, m)
	d := fams["kvrouter_route_duration_seconds"].Metric[0].Histogram
	if d.GetSampleCount() != 3 || d.GetSampleSum() < 0.00307 || d.GetSampleSum() > 0.00309 {
		t.Errorf("route duration count %d sum %v, want 3 and 0.00308", d.GetSampleCount(), d.GetSampleSum())
	}
	for _, bk := range d.Bucket {
		if bk.GetUpperBound() == 100e-6 && bk.GetCumulativeCount() != 1 {
			t.Errorf("routes ≤ 100µs = %d, want 1", bk.GetCumulativeCount())
		}
	}
	r := fams["kvrouter_route_cached_tokens_ratio"].Metric[0].Histogram
	if r.GetSampleCount() != 2 || r.GetSampleSum() != 0.75 {
		t.Errorf("cached ratio count %d sum %v, want 2 and 0.75", r.GetSampleCount(), r.GetSampleSum())
	}
}

// TestEverySessionReasonHasAUnit fails when the session index gains a
// reason the metrics do not map to a counter family.
func TestEverySessionReasonHasAUnit(t *testing.T) {
	for r := sessions.ReasonNone + 1; r < sessions.ReasonCount; r++ {
		if _, ok := sessionUnits[r]; !ok {
			t.Errorf("session reason %s has no metric family", r)
		}
	}
}

// TestHandlerServesExtraText checks that text-format metrics handed to
// Handler (the HTTP server's counters) are served with the OTel ones, and
// that a writer that fails does not take the others down.
func TestHandlerServesExtraText(t *testing.T) {
	m := newMetrics(t, newFake())
	httpText := func(w io.Writer) error {
		_, err := io.WriteString(w, "# HELP kvrouter_http_requests_total HTTP requests.\n"+
			"# TYPE kvrouter_http_requests_total counter\n"+
			`kvrouter_http_requests_total{path="/route",code="200"} 7`+"\n")
		return err
	}
	broken := func(io.Writer) error { return errors.New("no counters") }
	for _, h := range []http.Handler{m.Handler(httpText), m.Handler(httpText, broken)} {
		fams := scrapeHandler(t, h)
		if got := value(t, fams, "kvrouter_http_requests_total", map[string]string{"path": "/route", "code": "200"}); got != 7 {
			t.Errorf("http requests = %v, want 7", got)
		}
		if got := value(t, fams, "kvrouter_batches_total", map[string]string{"worker": "7"}); got != 5 {
			t.Errorf("batches = %v, want 5", got)
		}
	}
}

// TestRouteExpiredByStage checks that the route path's expired requests
// are served per stage, from actors/expiry's counters.
func TestRouteExpiredByStage(t *testing.T) {
	m := newMetrics(t, newFake())
	shard, route := map[string]string{"stage": "shard"}, map[string]string{"stage": "route"}
	session := map[string]string{"stage": "session"}
	fams := scrape(t, m)
	s0, r0 := value(t, fams, "kvrouter_route_expired_total", shard), value(t, fams, "kvrouter_route_expired_total", route)
	c0 := value(t, fams, "kvrouter_route_expired_total", session)
	expiry.Count(expiry.Shard)
	expiry.Count(expiry.Shard)
	expiry.Count(expiry.Route)
	expiry.Count(expiry.Session)
	expiry.Count(expiry.Session)
	expiry.Count(expiry.Session)
	fams = scrape(t, m)
	if d := value(t, fams, "kvrouter_route_expired_total", shard) - s0; d != 2 {
		t.Errorf("shard: +%v, want +2", d)
	}
	if d := value(t, fams, "kvrouter_route_expired_total", route) - r0; d != 1 {
		t.Errorf("route: +%v, want +1", d)
	}
	if d := value(t, fams, "kvrouter_route_expired_total", session) - c0; d != 3 {
		t.Errorf("session: +%v, want +3", d)
	}
}
