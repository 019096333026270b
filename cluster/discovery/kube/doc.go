// Package kube is the Kubernetes shell of package discovery: client-go
// informers (tools/cache) on the engine pods (one namespace, an optional
// label selector applied by the API server) and, when one is named, on an
// InferencePool (inference.networking.k8s.io/v1, read through the dynamic
// client: its spec.selector.matchLabels and spec.targetPorts[].number).
// Every change
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
// WatchObjectives (objectives.go) follows the namespace's
// InferenceObjectives the same way, for flow control's priority bands:
// it hands each new state on as a JSON List, which the request path
// parses and filters by pool (requestpath.ParseObjectives, the parser of
// the objectives file), so one parser reads both. It needs get, list and
// watch on that resource too (the chart's Role has them with
// discovery.watchInferenceObjectives).
//
// Metrics (WriteMetrics, Prometheus text): kvrouter_discovery_passes_total,
// kvrouter_discovery_actions_total{op,result}, kvrouter_discovery_skipped_pods_total{reason}
// (counted when a pod starts being skipped, with a log line saying why),
// kvrouter_discovery_pool_errors_total, kvrouter_discovery_streams (the
// streams the Ready pods call for). A pass that changes anything is one
// trace span (discovery.reconcile) with the count of each action.
//
// The pods are read by NewPodClient: a REST client of
// /api/v1/namespaces/NS/pods with a scheme of core/v1 alone. Not the
// obvious client-go clientset and informer factory: they compile a typed
// client, lister and informer for every Kubernetes API group (the scheme
// alone registers ~55 groups' types), which made most of the router's
// binary and build for two resources. The informers are the same reflector
// client-go's generated ones run: the initial state comes as a streaming
// list (a watch with sendInitialEvents) when the client supports it, else
// as a list then a watch.
//
// Tested with client-go's fake clientset (through kubefake) and dynamic
// fake client, whose watches deliver the same informer events as an API
// server's, and NewPodClient against an HTTP fake of the API server's pod
// endpoint (JSON list, watch and streaming list with its initial-events
// bookmark; the protobuf answers a real server gives are decoded by
// client-go's own codec, not exercised here). No real API server was run.
package kube
