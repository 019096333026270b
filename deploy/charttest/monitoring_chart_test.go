package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The chart's monitoring objects carry the repository's files unchanged:
// one ConfigMap per dashboard with the sidecar's label, a PrometheusRule
// whose spec is the rule file. monitoring.yaml renders
// ci/monitoring-values.yaml; monitoring-custom.yaml sets the sidecar's
// label and namespace.

// dashboardConfigMaps returns the rendered ConfigMaps that carry label,
// by name.
func dashboardConfigMaps(t *testing.T, m manifests, label string) map[string]corev1.ConfigMap {
	t.Helper()
	out := map[string]corev1.ConfigMap{}
	for name, doc := range m["ConfigMap"] {
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
			t.Fatalf("ConfigMap %s: %v", name, err)
		}
		if _, ok := cm.Labels[label]; ok {
			out[name] = cm
		}
	}
	return out
}

// checkDashboards: every file of dashboards/ is one ConfigMap, in
// namespace, labelled label=value, holding the file verbatim under its
// own name; no other ConfigMap carries the label.
func checkDashboards(t *testing.T, m manifests, label, value, namespace string) map[string]corev1.ConfigMap {
	t.Helper()
	cms := dashboardConfigMaps(t, m, label)
	files := dashboardFiles(t)
	if len(cms) != len(files) {
		t.Errorf("%d ConfigMaps labelled %s, want one per dashboard (%d)", len(cms), label, len(files))
	}
	for _, file := range files {
		key := filepath.Base(file)
		name := "kv-kvrouter-dashboard-" + strings.TrimSuffix(key, ".json")
		cm, ok := cms[name]
		if !ok {
			t.Errorf("%s: no ConfigMap %s", key, name)
			continue
		}
		if cm.Labels[label] != value || cm.Namespace != namespace {
			t.Errorf("%s: label %s=%q in namespace %q, want %q in %q", name, label, cm.Labels[label], cm.Namespace, value, namespace)
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.Data) != 1 {
			t.Errorf("%s: keys %d, want only %s", name, len(cm.Data), key)
		}
		got := cm.Data[key]
		if got != strings.TrimSuffix(string(want), "\n") {
			t.Errorf("%s: %s differs from %s", name, key, file)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: %s is not JSON", name, key)
		}
	}
	return cms
}

func TestMonitoringRendering(t *testing.T) {
	m := render(t, "monitoring.yaml")
	for name, cm := range checkDashboards(t, m, "grafana_dashboard", "1", "kv") {
		if cm.Annotations["grafana_folder"] != "kvrouter" {
			t.Errorf("%s: annotations %v, want grafana_folder: kvrouter", name, cm.Annotations)
		}
	}

	if len(m["PrometheusRule"]) != 1 {
		t.Fatalf("PrometheusRules: %d, want 1", len(m["PrometheusRule"]))
	}
	var rule struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec any `json:"spec"`
	}
	for _, doc := range m["PrometheusRule"] {
		if err := yaml.Unmarshal(doc, &rule); err != nil {
			t.Fatal(err)
		}
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Metadata.Labels["release"] != "prom" {
		t.Errorf("PrometheusRule %s: apiVersion %q, labels %v: want monitoring.coreos.com/v1 with release: prom",
			rule.Metadata.Name, rule.APIVersion, rule.Metadata.Labels)
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "alerts", "kvrouter.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file any
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule.Spec, file) {
		got, _ := json.MarshalIndent(rule.Spec, "", " ")
		t.Errorf("PrometheusRule spec differs from alerts/kvrouter.rules.yaml:\n%s", got)
	}
	if len(readRules(t).Groups) == 0 {
		t.Error("the rule file has no groups")
	}

	if len(m["ServiceMonitor"]) != 1 {
		t.Errorf("ServiceMonitors: %d, want 1", len(m["ServiceMonitor"]))
	}
}

func TestMonitoringCustomSidecarLabel(t *testing.T) {
	m := render(t, "monitoring-custom.yaml")
	checkDashboards(t, m, "kvrouter_dashboard", "yes", "monitoring")
	if n := len(dashboardConfigMaps(t, m, "grafana_dashboard")); n != 0 {
		t.Errorf("%d ConfigMaps keep the default label beside the configured one", n)
	}
	if len(m["PrometheusRule"]) != 0 {
		t.Error("a PrometheusRule with alerts.enabled false")
	}
}

func TestMonitoringOffByDefault(t *testing.T) {
	m := render(t, "default.yaml")
	if n := len(dashboardConfigMaps(t, m, "grafana_dashboard")); n != 0 {
		t.Errorf("%d dashboard ConfigMaps by default", n)
	}
	if len(m["PrometheusRule"]) != 0 {
		t.Error("a PrometheusRule by default")
	}
}
