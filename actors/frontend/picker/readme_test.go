package picker

import (
	"os"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"
)

// readmeEnvoy is the Envoy configuration of the README's picker section:
// the yaml block after "A minimal Envoy configuration".
func readmeEnvoy(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "A minimal Envoy configuration")
	if i < 0 {
		t.Fatal("README.md has no \"A minimal Envoy configuration\"")
	}
	s = s[i:]
	start := strings.Index(s, "```yaml\n")
	if start < 0 {
		t.Fatal("no yaml block after it")
	}
	s = s[start+len("```yaml\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatal("the yaml block does not end")
	}
	return []byte(s[:end])
}

// TestREADMEEnvoyConfigIsEnvoysBootstrap: the README's Envoy configuration
// parses as Envoy's own bootstrap (go-control-plane's generated types: an
// unknown field or an unresolvable typed config fails), passes Envoy's
// field constraints, and dials the picker as the gateways do — TLS with
// ALPN h2 and no verification — with ext_proc in full-duplex mode and the
// metadata namespaces of the protocol.
func TestREADMEEnvoyConfigIsEnvoysBootstrap(t *testing.T) {
	js, err := yaml.YAMLToJSON(readmeEnvoy(t))
	if err != nil {
		t.Fatal(err)
	}
	var boot bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &boot); err != nil {
		t.Fatalf("not an Envoy bootstrap: %v", err)
	}
	if err := boot.ValidateAll(); err != nil {
		t.Fatalf("Envoy's constraints: %v", err)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := boot.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	var ep filterv3.ExternalProcessor
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.ext_proc" {
			if err := f.GetTypedConfig().UnmarshalTo(&ep); err != nil {
				t.Fatal(err)
			}
		}
	}
	pm := ep.GetProcessingMode()
	if pm.GetRequestBodyMode() != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED || pm.GetResponseBodyMode() != filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		t.Errorf("body modes %v/%v, want full duplex", pm.GetRequestBodyMode(), pm.GetResponseBodyMode())
	}
	if fw := ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(); !slices.Contains(fw, "envoy.lb") || !slices.Contains(fw, "envoy.lb.subset_hint") {
		t.Errorf("forwarded namespaces %v", fw)
	}
	name := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	var epp *clusterv3.Cluster
	for _, c := range boot.GetStaticResources().GetClusters() {
		if c.GetName() == name {
			epp = c
		}
	}
	if epp == nil {
		t.Fatalf("ext_proc dials cluster %q, which is not defined", name)
	}
	var up tlsv3.UpstreamTlsContext
	if ts := epp.GetTransportSocket(); ts.GetName() != "envoy.transport_sockets.tls" || ts.GetTypedConfig().UnmarshalTo(&up) != nil {
		t.Fatalf("the picker's cluster does not dial TLS: %v", ts)
	}
	ctx := up.GetCommonTlsContext()
	if !slices.Equal(ctx.GetAlpnProtocols(), []string{"h2"}) {
		t.Errorf("ALPN %v, want h2", ctx.GetAlpnProtocols())
	}
	if vc := ctx.GetValidationContext(); vc == nil || vc.GetTrustedCa() != nil {
		t.Errorf("validation context %v: want an empty one (the certificate not verified, as the gateways)", vc)
	}
}
