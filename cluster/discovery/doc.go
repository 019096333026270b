// Package discovery turns the engine pods a cluster scheduler reports into
// worker registrations, and the difference between those and the
// registrations the router holds into actions. It is the pure core of
// `kvrouter serve --discover kubernetes`; package discovery/kube is the
// client-go shell that feeds it pods and an InferencePool and applies its
// actions.
//
//	Desired   pods (+ pool) → the registrations they call for (desired.go)
//	Plan      desired vs registered → register / unregister / re-register
//	Mine      the actions this router host writes in a cluster (plan.go)
//	WorkerID  a pod's instance id: the same on every host (id.go)
//
// # What a pod becomes
//
// A pod counts when it is Ready (condition Ready true), has an IP, is not
// being deleted, and matches the pool's selector (when a pool is used; the
// label selector of --selector is applied by the API server). It becomes
// dp-size registrations, one per data-parallel rank r, all with the
// instance id WorkerID(namespace, name):
//
//	KV events   tcp://IP:(P+r)  P: annotation kvrouter.io/kv-events-port
//	                             (number or container port name), else the
//	                             container port named kv-events, else 5557
//	replay      tcp://IP:(R+r)  R: annotation kvrouter.io/replay-port, else
//	                             the port named kv-replay, else the
//	                             configured default (none unless set)
//	serving     IP:S            S: annotation kvrouter.io/serving-port, else
//	                             the pool's target port (rank r takes the
//	                             r-th when the pool lists one per rank),
//	                             else the port named http, else 8000
//	model       annotation or label kvrouter.io/model (else the default)
//	tenant      annotation or label kvrouter.io/tenant
//	block size  annotation or label kvrouter.io/block-size
//	dp size     annotation or label kvrouter.io/dp-size (default 1)
//	metrics     http://IP:M/PATH when the pod has annotation
//	            kvrouter.io/metrics-port M (number or container port name;
//	            absent: the serving port) or kvrouter.io/metrics-path PATH
//	            (default /metrics); else none named: the serving
//	            endpoint's /metrics is scraped (with --engine-signals)
//	engine      label kvrouter.io/engine (auto, vllm, sglang, trtllm), else
//	            the default (auto: decided per stream from its batches)
//	role        label llm-d.ai/role (prefill, decode, prefill-decode = both),
//	            else annotation or label kvrouter.io/role (the same values,
//	            or both), else both; a pod whose role changes is
//	            re-registered with the new one, so it moves pools
//	bootstrap   annotation kvrouter.io/bootstrap-port B (number or container
//	            port name): an SGLang prefill engine's bootstrap server at
//	            IP:B, named in split /route answers
//
// Consecutive ports per rank are how vLLM lays out data parallelism: rank r
// publishes on the configured port + r (its replay endpoint likewise). A
// pod whose values do not parse (a block size "abc", a port name it does
// not have, a dp size past MaxDpSize) is skipped with a Reason, which the
// shell counts and logs; it never stops the other pods.
//
// # Identity and idempotence
//
// A pod's instance id is a hash of its namespace and name, with bit 52 set
// (WorkerID): every router host derives the same id from the same pod, so
// hosts that watch the same pods compute the same desired registrations,
// and Plan against the replicated registry finds nothing to do for a pod
// another host already registered. In a cluster, Mine keeps only the
// actions of pods this host owns (the registry's rendezvous owner of the
// pod's rank 0), so one host writes each pod's registrations: no duplicate
// writes, and when that host leaves, the new owner's next pass picks up
// whatever it had not written. Ids in the discovery range (Discovered) are
// discovery's: a registration in that range that no Ready pod calls for
// is unregistered, even one made before a restart; ids registered by hand
// (POST /register) stay below 2^52 and are never touched.
//
// Ids stay below 2^53 so that JSON clients that read numbers as doubles
// keep them exact. 52 hash bits make a collision among 10,000 pods about a
// one-in-90-million event; two pods that collide are both skipped
// (ReasonIDCollision).
//
// # Why not one registration per pod IP, or per UID
//
// An IP is reused by other pods and a UID changes when a StatefulSet pod is
// recreated under the same name; the name is what operators see and what
// stays put, while an IP change under the same name (a recreated pod) is a
// new cache, so Plan re-registers it: the old rank's blocks leave the index
// before the new endpoint's stream starts.
package discovery
