package charttest

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// grpcProbe checks p asks the gRPC health service svc on port.
func grpcProbe(t *testing.T, name string, p *corev1.Probe, port int32, svc string) {
	t.Helper()
	if p == nil || p.GRPC == nil || p.GRPC.Port != port || p.GRPC.Service == nil || *p.GRPC.Service != svc {
		t.Errorf("%s probe %+v: want gRPC health %q on port %d", name, p, svc, port)
	}
}

func servicePort(t *testing.T, m manifests, name string) corev1.ServicePort {
	t.Helper()
	var svc corev1.Service
	m.one(t, "Service", &svc)
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("service ports %v lack %s", svc.Spec.Ports, name)
	return corev1.ServicePort{}
}

func appProtocol(p corev1.ServicePort) string {
	if p.AppProtocol == nil {
		return ""
	}
	return *p.AppProtocol
}

// drainFits: the pod's grace period is above serve's drain timeout.
func drainFits(t *testing.T, d appsv1.Deployment, c corev1.Container, drainSeconds int64) {
	t.Helper()
	if !hasArg(c, "--drain-timeout="+itoa(drainSeconds)+"s") {
		t.Errorf("args %q lack --drain-timeout=%ds", c.Args, drainSeconds)
	}
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= drainSeconds {
		t.Errorf("terminationGracePeriodSeconds %v: want above the drain timeout %d", g, drainSeconds)
	}
}

func itoa(n int64) string {
	b, _ := yaml.Marshal(n)
	return strings.TrimSpace(string(b))
}

// checkPickerDefaults: TLS with the in-memory certificate (no cert dir, no
// Secret), the plaintext health port probed over gRPC for liveness and
// readiness, both picker ports on the Service (the picker's as http2: TLS),
// drain timing, no DestinationRule.
func checkPickerDefaults(t *testing.T, m manifests, d appsv1.Deployment, c corev1.Container) {
	t.Helper()
	if !hasArg(c, "--epp-health-listen=0.0.0.0:9003") {
		t.Errorf("args %q lack the health port", c.Args)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, "--epp-secure-serving") || strings.HasPrefix(a, "--epp-cert-dir") || strings.HasPrefix(a, "--epp-conformance")
	}) {
		t.Errorf("args %q: want TLS by default with the self-signed certificate and no hooks", c.Args)
	}
	grpcProbe(t, "startup", c.StartupProbe, 9003, "liveness")
	grpcProbe(t, "liveness", c.LivenessProbe, 9003, "liveness")
	grpcProbe(t, "readiness", c.ReadinessProbe, 9003, "readiness")
	if p := servicePort(t, m, "picker"); appProtocol(p) != "http2" {
		t.Errorf("picker service port appProtocol %q, want http2 (TLS)", appProtocol(p))
	}
	if p := servicePort(t, m, "picker-health"); p.Port != 9003 || appProtocol(p) != "kubernetes.io/h2c" {
		t.Errorf("picker-health service port %+v, want 9003 h2c", p)
	}
	if slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil }) {
		t.Error("a Secret mounted without picker.tls.secretName")
	}
	drainFits(t, d, c, 30)
	if len(m["DestinationRule"]) != 0 {
		t.Error("a DestinationRule by default")
	}
}

// TestPickerTLSFromASecret: picker.tls.secretName mounts the Secret where
// --epp-cert-dir reads it; the Istio DestinationRule dials only the picker
// port with TLS unverified; a longer drain gets a longer grace period.
func TestPickerTLSFromASecret(t *testing.T) {
	m, d, c := certDirFromSecret(t, "picker-tls.yaml", "--epp-cert-dir", "kvrouter-picker-tls", "/etc/kvrouter/picker-tls")
	drainFits(t, d, c, 45)
	if len(m["DestinationRule"]) != 1 {
		t.Fatalf("DestinationRules: %d, want 1", len(m["DestinationRule"]))
	}
	var dr struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Host          string `json:"host"`
			TrafficPolicy struct {
				TLS               any `json:"tls"`
				PortLevelSettings []struct {
					Port struct {
						Number int `json:"number"`
					} `json:"port"`
					TLS struct {
						Mode               string `json:"mode"`
						InsecureSkipVerify bool   `json:"insecureSkipVerify"`
					} `json:"tls"`
				} `json:"portLevelSettings"`
			} `json:"trafficPolicy"`
		} `json:"spec"`
	}
	for _, doc := range m["DestinationRule"] {
		if err := yaml.Unmarshal(doc, &dr); err != nil {
			t.Fatal(err)
		}
	}
	pl := dr.Spec.TrafficPolicy.PortLevelSettings
	if dr.APIVersion != "networking.istio.io/v1" || dr.Spec.Host != "kv-kvrouter.kv.svc.cluster.local" || dr.Spec.TrafficPolicy.TLS != nil ||
		len(pl) != 1 || pl[0].Port.Number != 9002 || pl[0].TLS.Mode != "SIMPLE" || !pl[0].TLS.InsecureSkipVerify {
		t.Errorf("DestinationRule %+v: want SIMPLE, insecureSkipVerify on the Service's port 9002 only", dr)
	}
}

// TestPickerPlaintext: picker.tls.enabled=false serves h2c (the Service
// says so) and renders no DestinationRule even when asked; grpcHealth=false
// probes over HTTP.
func TestPickerPlaintext(t *testing.T) {
	m := render(t, "picker-plaintext.yaml")
	_, c := container(t, m)
	if !hasArg(c, "--epp-secure-serving=false") {
		t.Errorf("args %q lack --epp-secure-serving=false", c.Args)
	}
	if p := servicePort(t, m, "picker"); appProtocol(p) != "kubernetes.io/h2c" {
		t.Errorf("picker service port appProtocol %q, want kubernetes.io/h2c", appProtocol(p))
	}
	if len(m["DestinationRule"]) != 0 {
		t.Error("a TLS DestinationRule for a plaintext picker")
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz with grpcHealth off", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz with grpcHealth off", p)
	}
}

// certDirFromSecret renders file and checks the Secret named secret is
// mounted read-only at path, which flag names.
func certDirFromSecret(t *testing.T, file, flag, secret, path string) (manifests, appsv1.Deployment, corev1.Container) {
	t.Helper()
	m := render(t, file)
	d, c := container(t, m)
	if !hasArg(c, flag+"="+path) {
		t.Errorf("args %q lack %s=%s", c.Args, flag, path)
	}
	var vol string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			vol = v.Name
		}
	}
	if vol == "" || !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool {
		return vm.Name == vol && vm.MountPath == path && vm.ReadOnly
	}) {
		t.Errorf("Secret %s not mounted read-only at %s: volumes %+v, mounts %+v", secret, path, d.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
	return m, d, c
}

// TestClusterTLSFromASecret: cluster.tlsSecretName mounts the Secret where
// --cluster-tls-dir reads it.
func TestClusterTLSFromASecret(t *testing.T) {
	certDirFromSecret(t, "clustered.yaml", "--cluster-tls-dir", "kvrouter-cluster-tls", "/etc/kvrouter/cluster-tls")
}
