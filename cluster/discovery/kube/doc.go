// Package kube is the Kubernetes shell of package discovery: client-go
// informers on the engine pods (one namespace, an optional label selector
// applied by the API server) and, when one is named, on an InferencePool
// (inference.networking.k8s.io/v1, read through the dynamic client: its
// spec.selector.matchLabels and spec.targetPorts[].number). Every change
// either informer reports, and a full pass every Config.Resync, runs one
// reconcile: the informers' caches → discovery.Desired → discovery.Plan
// against the router's registry → discovery.Mine (one writer per pod in a
// cluster) → Registry.Register / Unregister. A pass never runs before both
// caches have synced (an empty cache would unregister every pod), and one
// goroutine runs them all, so actions never interleave.
//
// What it needs from the API server: get, list and watch on pods (and on
// inferencepools when a pool is named) in the watched namespace — nothing
// else, nothing cluster-wide (deploy/helm/kvrouter's Role).
//
// Metrics (WriteMetrics, Prometheus text): kvrouter_discovery_passes_total,
// kvrouter_discovery_actions_total{op,result}, kvrouter_discovery_skipped_pods_total{reason}
// (counted when a pod starts being skipped, with a log line saying why),
// kvrouter_discovery_pool_errors_total, kvrouter_discovery_streams (the
// streams the Ready pods call for). A pass that changes anything is one
// trace span (discovery.reconcile) with the count of each action.
//
// Tested with client-go's fake clientset and dynamic fake client, whose
// watches deliver the same informer events as an API server's; no real
// API server was run.
package kube
