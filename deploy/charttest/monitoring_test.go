package charttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// The dashboards and alert rules cannot rot: every PromQL expression in
// them is parsed with Prometheus's own parser, and every metric it names,
// with every label it matches on, must be in the /metrics of a live
// kvrouter serve fed by simulated engines (live_test.go). A renamed metric
// or label fails here instead of leaving an empty panel or a silent alert.

const chartDir = "../helm/kvrouter"

// scrapeLabels are added by the scrape (Kubernetes service discovery, the
// ServiceMonitor), not by kvrouter.
var scrapeLabels = []string{"namespace", "pod", "instance", "job", "service", "container", "endpoint"}

// query is one PromQL expression and where it came from.
type query struct{ where, expr string }

type panel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Targets     []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func dashboardFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards under %s/dashboards: %v", chartDir, err)
	}
	return files
}

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// dashboardQueries reads every dashboard, checks its shape (the variables,
// a description that says what a bad value means on every panel) and
// returns its expressions.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	uids := map[string]string{}
	for _, file := range dashboardFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := filepath.Base(file)
		if d.UID == "" || d.Title == "" || uids[d.UID] != "" {
			t.Errorf("%s: uid %q (also %s), title %q: want a unique uid and a title", name, d.UID, uids[d.UID], d.Title)
		}
		uids[d.UID] = name
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
			if v.Type != "query" {
				continue
			}
			q, _ := v.Query.(map[string]any)["query"].(string)
			m := labelValues.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", name, v.Name, q)
				continue
			}
			out = append(out, query{name + " variable " + v.Name, m[1]})
		}
		for _, want := range []string{"datasource", "namespace", "model", "worker"} {
			if !vars[want] {
				t.Errorf("%s: no %s variable", name, want)
			}
		}
		var walk func([]panel)
		n := 0
		walk = func(ps []panel) {
			for _, p := range ps {
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				n++
				if !strings.Contains(p.Description, "Bad") {
					t.Errorf("%s: panel %q: its description must say what a bad value means (\"Bad: …\"): %q", name, p.Title, p.Description)
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", name, p.Title)
				}
				for _, tg := range p.Targets {
					out = append(out, query{name + " panel " + p.Title, tg.Expr})
				}
			}
		}
		walk(d.Panels)
		if n == 0 {
			t.Errorf("%s: no panels", name)
		}
	}
	return out
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "alerts", "kvrouter.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("alert rules: %v", err)
	}
	return rf
}

// ruleQueries checks every alert's shape (a severity, a summary, a runbook
// section in the chart's README) and returns the expressions.
func ruleQueries(t *testing.T) []query {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []query
	seen := map[string]bool{}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("group %s: alert %q: want a unique name", g.Name, r.Alert)
			}
			seen[r.Alert] = true
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: want a severity label and a summary", r.Alert)
			}
			if rb := r.Annotations["runbook"]; rb != r.Alert || !strings.Contains(string(readme), "\n### "+rb+"\n") {
				t.Errorf("%s: runbook %q: want the alert's name and a \"### %s\" section in the chart's README", r.Alert, rb, r.Alert)
			}
			out = append(out, query{"alert " + r.Alert, r.Expr})
		}
	}
	for _, want := range []string{"KVRouterWorkerDegraded", "KVRouterWorkerRecovering", "KVRouterReplayFailures", "KVRouterNoSyncedWorker",
		"KVRouterRouteErrors", "KVRouterEveryWorkerSaturated", "KVRouterClusterMemberUnreachable", "KVRouterPredictedHitRateCollapse"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
	return out
}

// grafanaVars are replaced before parsing: Grafana expands them first.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$namespace", ".*", "$model", ".*", "$worker", ".*")

// selectors parses expr with Prometheus's parser and returns its vector
// selectors (a matrix selector's included).
func selectors(expr string) ([]*parser.VectorSelector, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}

func TestDashboardsAndAlertsUseLiveMetrics(t *testing.T) {
	queries := append(dashboardQueries(t), ruleQueries(t)...)
	exported := liveMetrics(t)
	used := map[string]bool{}
	for _, q := range queries {
		sels, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: no metric in %q", q.where, q.expr)
		}
		for _, vs := range sels {
			labels, ok := exported[vs.Name]
			if !ok {
				t.Errorf("%s: metric %s is not in the live /metrics", q.where, vs.Name)
				continue
			}
			used[vs.Name] = true
			for _, m := range vs.LabelMatchers {
				if m.Name != "__name__" && !labels[m.Name] && !slices.Contains(scrapeLabels, m.Name) {
					t.Errorf("%s: %s has no label %q in the live /metrics", q.where, vs.Name, m.Name)
				}
			}
		}
	}
	if len(used) < 30 {
		t.Errorf("the dashboards and alerts use %d metrics; something stopped reading them", len(used))
	}
}
