// Package charttest checks the manifests deploy/helm/kvrouter renders:
// ports, probes, RBAC verbs, the security context, clustering, and the
// monitoring objects (the dashboards' ConfigMaps and the PrometheusRule
// equal to the files they wrap). `make test-chart` renders the chart with
// Helm (the default values, ci/clustered-values.yaml,
// ci/monitoring-values.yaml) into a directory named by
// KVROUTER_CHART_RENDERED and runs these tests on it; without that
// variable the tests fail (they cannot check a chart they were not
// given). A module of its own, so that the router's `go test ./...`
// neither runs it without the rendering nor pulls Helm into its go.mod.
package charttest
