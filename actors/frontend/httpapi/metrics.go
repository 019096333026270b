package httpapi

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// metrics are the server's own counters. Labels come from the fixed route
// table (path patterns, "other" for unknown paths) and status codes, so
// their number is bounded whatever clients send.
type metrics struct {
	requests sync.Map // requestKey → *atomic.Uint64
	panics   atomic.Uint64
	inFlight atomic.Int64
}

type requestKey struct {
	path string
	code int
}

func (m *metrics) count(path string, code int) {
	k := requestKey{path, code}
	c, ok := m.requests.Load(k)
	if !ok {
		c, _ = m.requests.LoadOrStore(k, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

// WriteMetrics writes the server's counters in the Prometheus text format
// (version 0.0.4): requests by path pattern and status code, recovered
// panics, and requests in flight. A caller serving its own /metrics
// (Options.MetricsHandler) includes these by calling it.
func (h *Handler) WriteMetrics(w io.Writer) error {
	type row struct {
		requestKey
		n uint64
	}
	var rows []row
	h.metrics.requests.Range(func(k, v any) bool {
		rows = append(rows, row{k.(requestKey), v.(*atomic.Uint64).Load()})
		return true
	})
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.code, b.code))
	})
	bw := bufio.NewWriter(w)
	bw.WriteString("# HELP kvrouter_http_requests_total HTTP requests answered, by route path pattern and status code.\n")
	bw.WriteString("# TYPE kvrouter_http_requests_total counter\n")
	for _, r := range rows {
		bw.WriteString(`kvrouter_http_requests_total{path="`)
		bw.WriteString(r.path) // from the route table: no escaping needed
		bw.WriteString(`",code="`)
		bw.WriteString(strconv.Itoa(r.code))
		bw.WriteString(`"} `)
		bw.WriteString(strconv.FormatUint(r.n, 10))
		bw.WriteByte('\n')
	}
	bw.WriteString("# HELP kvrouter_http_panics_total Handler panics recovered and answered 500.\n")
	bw.WriteString("# TYPE kvrouter_http_panics_total counter\n")
	bw.WriteString("kvrouter_http_panics_total " + strconv.FormatUint(h.metrics.panics.Load(), 10) + "\n")
	bw.WriteString("# HELP kvrouter_http_requests_in_flight HTTP requests being answered.\n")
	bw.WriteString("# TYPE kvrouter_http_requests_in_flight gauge\n")
	bw.WriteString("kvrouter_http_requests_in_flight " + strconv.FormatInt(h.metrics.inFlight.Load(), 10) + "\n")
	return bw.Flush()
}
