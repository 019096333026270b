package kube

import (
	"io"

	"github.com/kvrouter/kvrouter/cluster/discovery"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// metrics are discovery's counters, on a registry of their own (served
// with the router's through WriteMetrics).
type metrics struct {
	reg        *prometheus.Registry
	passes     prometheus.Counter
	actions    *prometheus.CounterVec
	skips      *prometheus.CounterVec
	poolErrors prometheus.Counter
	streams    prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_discovery_passes_total",
			Help: "Reconcile passes of Kubernetes discovery."}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_discovery_actions_total",
			Help: "Registry writes discovery made, by op (register, reregister, unregister) and result (ok, error)."}, []string{"op", "result"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kvrouter_discovery_skipped_pods_total",
			Help: "Ready pods left unregistered, counted when a pod starts being skipped, by reason."}, []string{"reason"}),
		poolErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kvrouter_discovery_pool_errors_total",
			Help: "Passes whose InferencePool could not be read (no pod selected)."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kvrouter_discovery_streams",
			Help: "Streams (pod, dp rank) the Ready pods call for."}),
	}
	m.reg.MustRegister(m.passes, m.actions, m.skips, m.poolErrors, m.streams)
	return m
}

func (m *metrics) action(op discovery.Op, result string) {
	m.actions.WithLabelValues(string(op), result).Inc()
}
func (m *metrics) skip(r discovery.Reason) { m.skips.WithLabelValues(string(r)).Inc() }
func (m *metrics) poolError()              { m.poolErrors.Inc() }
func (m *metrics) pass(streams int) {
	m.passes.Inc()
	m.streams.Set(float64(streams))
}

// WriteMetrics writes discovery's metrics in the Prometheus text format.
func (d *Discovery) WriteMetrics(w io.Writer) error {
	fams, err := d.metrics.reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}
