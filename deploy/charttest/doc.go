// Package charttest checks the manifests deploy/helm/kvrouter renders:
// ports, probes, RBAC verbs, the security context, clustering. `make
// test-chart` renders the chart with Helm (the default values and
// ci/clustered-values.yaml) into a directory named by
// KVROUTER_CHART_RENDERED and runs these tests on it; without that
// variable the tests fail (they cannot check a chart they were not
// given). A module of its own, so that the router's `go test ./...`
// neither runs it without the rendering nor pulls Helm into its go.mod.
package charttest
