package charttest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// manifests is one rendering: every object by kind, then name.
type manifests map[string]map[string][]byte

// render reads the rendering file (default.yaml, clustered.yaml) that
// make test-chart wrote.
func render(t *testing.T, file string) manifests {
	t.Helper()
	dir := os.Getenv("KVROUTER_CHART_RENDERED")
	if dir == "" {
		t.Fatal("KVROUTER_CHART_RENDERED is not set: run `make test-chart`, which renders the chart with Helm and sets it")
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	out := manifests{}
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: %v\n%s", file, err, doc)
		}
		if head.Kind == "" {
			continue // a comment-only document
		}
		if out[head.Kind] == nil {
			out[head.Kind] = map[string][]byte{}
		}
		out[head.Kind][head.Metadata.Name] = doc
	}
	return out
}

// one decodes the only object of kind into v.
func (m manifests) one(t *testing.T, kind string, v any) {
	t.Helper()
	if len(m[kind]) != 1 {
		t.Fatalf("want one %s, got %d", kind, len(m[kind]))
	}
	for _, doc := range m[kind] {
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
	}
}

func container(t *testing.T, m manifests) (appsv1.Deployment, corev1.Container) {
	t.Helper()
	var d appsv1.Deployment
	m.one(t, "Deployment", &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers: %d", len(d.Spec.Template.Spec.Containers))
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

func hasArg(c corev1.Container, arg string) bool { return slices.Contains(c.Args, arg) }

func TestDefaultRendering(t *testing.T) {
	m := render(t, "default.yaml")
	d, c := container(t, m)
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d, want 1", *d.Spec.Replicas)
	}
	for _, a := range []string{"serve", "--http=0.0.0.0:8090", "--epp-listen=0.0.0.0:9002", "--proxy-listen=0.0.0.0:8000",
		"--discover=kubernetes", "--namespace=kv", "--selector=llm-d.ai/inference-serving=true", "--discover-kv-events-port=5557"} {
		if !hasArg(c, a) {
			t.Errorf("args %q lack %q", c.Args, a)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--cluster") }) {
		t.Errorf("one host renders cluster flags: %q", c.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if want := map[string]int32{"http": 8090, "picker": 9002, "picker-health": 9003, "proxy": 8000}; !equalMaps(ports, want) {
		t.Errorf("container ports %v, want %v", ports, want)
	}
	checkPickerDefaults(t, m, d, c)
	checkSecurity(t, d, c)
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests %v: want cpu and memory", c.Resources.Requests)
	}

	var svc corev1.Service
	m.one(t, "Service", &svc)
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() != p.Name || ports[p.Name] == 0 || p.Port != ports[p.Name] {
			t.Errorf("service port %+v does not reach the container port %s", p, p.Name)
		}
	}
	if len(svc.Spec.Ports) != 4 {
		t.Errorf("service ports %v, want http, picker, picker-health, proxy", svc.Spec.Ports)
	}
	checkRBAC(t, m, d, "kv", false)
	if len(m["ServiceMonitor"]) != 0 {
		t.Error("a ServiceMonitor by default")
	}
	var cm corev1.ConfigMap
	m.one(t, "ConfigMap", &cm)
	if cm.Data["workers.json"] != "[]" {
		t.Errorf("workers.json %q, want []", cm.Data["workers.json"])
	}
}

func TestClusteredRendering(t *testing.T) {
	m := render(t, "clustered.yaml")
	d, c := container(t, m)
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
	}
	for _, a := range []string{"--cluster=kvrouter", "--cluster-provider=etcd",
		"--etcd-endpoints=http://etcd-0.etcd.kv.svc:2379,http://etcd-1.etcd.kv.svc:2379", "--cluster-bind=$(POD_IP):7000",
		"--namespace=llm", "--inference-pool=llm/vllm-llama3-8b", "--discover-replay-port=5558",
		"--watch-inference-objectives", "--inference-objectives-resource=inference.networking.x-k8s.io/v1alpha2/inferenceobjectives"} {
		if !hasArg(c, a) {
			t.Errorf("args %q lack %q", c.Args, a)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--selector") }) {
		t.Errorf("an empty selector rendered: %q", c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_IP"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP %+v: want the downward API's status.podIP", e)
	}
	if e := env["KVROUTER_API_TOKEN"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "kvrouter-token" {
		t.Errorf("KVROUTER_API_TOKEN %+v: want the secret's key", e)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "cluster" && p.ContainerPort == 7000 }) {
		t.Errorf("ports %v lack cluster 7000", c.Ports)
	}
	checkSecurity(t, d, c)
	checkRBAC(t, m, d, "llm", true)
	var sm struct {
		Spec struct {
			Endpoints []struct{ Port, Path string } `json:"endpoints"`
		} `json:"spec"`
	}
	if len(m["ServiceMonitor"]) != 1 {
		t.Fatalf("ServiceMonitors: %d, want 1", len(m["ServiceMonitor"]))
	}
	for _, doc := range m["ServiceMonitor"] {
		if err := yaml.Unmarshal(doc, &sm); err != nil {
			t.Fatal(err)
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want http /metrics", sm.Spec.Endpoints)
	}
}

func checkSecurity(t *testing.T, d appsv1.Deployment, c corev1.Container) {
	t.Helper()
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("pod security context %+v: want non-root", ps)
	}
	cs := c.SecurityContext
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
		cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem ||
		cs.Capabilities == nil || !slices.Contains(cs.Capabilities.Drop, "ALL") {
		t.Errorf("container security context %+v: want no escalation, read-only root, ALL capabilities dropped", cs)
	}
}

// checkRBAC: one Role in the watched namespace, get/list/watch only, on
// pods (and inferencepools and inferenceobjectives with a pool, as the
// clustered values watch them); bound to the Deployment's
// ServiceAccount; nothing cluster-wide.
func checkRBAC(t *testing.T, m manifests, d appsv1.Deployment, namespace string, pool bool) {
	t.Helper()
	if len(m["ClusterRole"])+len(m["ClusterRoleBinding"]) != 0 {
		t.Error("cluster-wide RBAC rendered")
	}
	var role rbacv1.Role
	m.one(t, "Role", &role)
	if role.Namespace != namespace {
		t.Errorf("Role in %q, want the watched namespace %q", role.Namespace, namespace)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}
	if pool {
		want = append(want, rbacv1.PolicyRule{APIGroups: []string{"inference.networking.k8s.io"}, Resources: []string{"inferencepools"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"inference.networking.x-k8s.io"}, Resources: []string{"inferenceobjectives"}, Verbs: []string{"get", "list", "watch"}})
	}
	if len(role.Rules) != len(want) {
		t.Fatalf("Role rules %+v, want %+v", role.Rules, want)
	}
	for i, r := range role.Rules {
		w := want[i]
		if !slices.Equal(r.APIGroups, w.APIGroups) || !slices.Equal(r.Resources, w.Resources) || !slices.Equal(r.Verbs, w.Verbs) {
			t.Errorf("rule %d: %+v, want %+v", i, r, w)
		}
	}
	var rb rbacv1.RoleBinding
	m.one(t, "RoleBinding", &rb)
	sa := d.Spec.Template.Spec.ServiceAccountName
	if rb.Namespace != namespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != sa || rb.Subjects[0].Namespace != "kv" {
		t.Errorf("RoleBinding %+v: want Role %s bound to ServiceAccount kv/%s", rb, role.Name, sa)
	}
	if _, ok := m["ServiceAccount"][sa]; !ok {
		t.Errorf("ServiceAccount %q not rendered", sa)
	}
}

func equalMaps(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
