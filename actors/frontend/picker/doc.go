// Package picker puts kvrouter in Envoy's request path as an endpoint
// picker: a gRPC server implementing Envoy's external processing service
// (envoy.service.ext_proc.v3.ExternalProcessor) the way the Gateway API
// Inference Extension's "Endpoint Picker Protocol" asks (kvrouter serve
// --epp-listen).
//
// # What it does
//
// For each HTTP request Envoy opens one ext_proc stream. The picker reads
// the request headers and body, finds the model and the prompt of an
// OpenAI request (ParsePrompt: /v1/completions with token ids or text,
// /v1/chat/completions with messages; text needs a Tokenizer, and without
// one the request is routed by load with a counted reason), asks the Core
// for the chosen worker and the next best ones, and answers with their
// serving endpoints, best first and comma-separated, in both the
// x-gateway-destination-endpoint request header and the dynamic metadata
// envoy.lb / x-gateway-destination-endpoint (the same value). Envoy's
// ORIGINAL_DST cluster sends the request there; a retry walks the list.
//
//   - Subset: a request whose filter metadata carries envoy.lb.subset_hint /
//     x-gateway-destination-endpoint-subset is routed within that list only;
//     an empty list, or one with no eligible endpoint, is answered 503.
//   - No ready endpoint: 503. Shed under overload (the Core's call): 429.
//     A body that is not an OpenAI JSON request: 400; past MaxBody: 413.
//   - Responses: the endpoint Envoy really used (metadata_context envoy.lb /
//     x-gateway-destination-endpoint-served, different from the first
//     choice after a retry) is where the request is booked; the first
//     response body chunk marks prefill done; the end of the response, an
//     error or a reset stream frees it. Each happens at most once, and the
//     free exactly once for every request routed: nobody calls the
//     bookkeeping endpoints.
//   - Transport: with Config.TLS the ext_proc port serves TLS (ALPN h2;
//     kvrouter serve builds it with actors/certs: a certificate directory
//     re-read on change, else a self-signed certificate made in memory,
//     optionally a client CA), as every gateway implementing InferencePool
//     dials its picker (TLS, no certificate verification); without it,
//     plaintext h2c.
//   - Health (gRPC health checking protocol), on the ext_proc port and in
//     plaintext on a port of its own (ServeHealth: kubelet's gRPC probes
//     cannot speak TLS): "liveness" is always serving; "", "readiness",
//     "inference-extension" (the name GIE's manifests probe) and
//     "envoy.service.ext_proc.v3.ExternalProcessor" follow Config.Ready
//     (kvrouter serve: the service answers and its index has synced the
//     registered workers, service.Service.Synced).
//   - Drain: readiness NOT_SERVING for good while streams, open and new,
//     are still served; when Serve's context ends, streams still open get
//     StopGrace, are cut, and Serve returns once each one's booking is
//     freed.
//   - Conformance hooks (StreamConfig.ConformanceHooks, off by default: a
//     client could choose its endpoint): the conformance suite's
//     test-epp-endpoint-selection header restricts the candidates, and the
//     served endpoint is echoed in x-conformance-test-served-endpoint. A
//     bare IP in a subset or selection allows every port of it.
//   - One trace per request (span kvrouter.epp.request), continuing the
//     traceparent header Envoy forwards; Prometheus counters per outcome,
//     per load-only reason, per bookkeeping event (WriteMetrics).
//
// # Message order
//
// The body send mode decides what the picker answers when, as Envoy and
// GIE's reference picker do it. The mode comes from the protocol_config of
// the stream's first message (recent Envoys send it), else from
// StreamConfig.Modes.
//
//   - FULL_DUPLEX_STREAMED (what llm-d configures): Envoy sends the headers
//     and every body chunk without waiting. The picker answers nothing until
//     the body's end_of_stream (or the request trailers), then sends the
//     headers response carrying the destination and the dynamic metadata,
//     then the whole body back in StreamedBodyResponse chunks of at most
//     62,000 bytes (the last one with end_of_stream), then a trailers
//     response if trailers ended the body. Envoy forwards only what the
//     picker gives back. Response body chunks are given back the same way.
//   - BUFFERED (what AIBrix configures for requests): Envoy waits for the
//     headers response before it buffers the body, so the headers are
//     answered at once, unchanged, and the destination goes in the body
//     response's header mutation (applied in BUFFERED mode only) with the
//     route cache cleared.
//   - Any other request body mode (NONE, STREAMED, ...) and a request with
//     no body: the picker cannot see the body before the headers must be
//     answered, so it routes on the headers (model from the
//     x-gateway-model-name header or StreamConfig.DefaultModel), by load,
//     reason no_body.
//   - Response headers, trailers and non-duplex response bodies are
//     answered unchanged, one response per message.
//
// # Why a pure state machine
//
// Stream is the protocol for one ext_proc stream as a plain value: messages
// in, Actions out (send, route, book, end), no I/O, like the listener's
// Tracker. Every order of messages is a table test (stream_test.go) and
// FuzzStream checks the bookkeeping invariants over any sequence; the gRPC
// server (server.go) only receives, carries out the actions and counts.
// FromPath is the Core over the shared request path
// (actors/frontend/requestpath). The fake Envoy (envoytest) drives the real
// generated client over a real gRPC connection in both body modes, dialed
// with TLS as the gateways dial it, against a fake Core and end to end
// against the real router and simulated engines' OpenAI surface; no real
// Envoy runs in this repository's tests (the README's Envoy configuration
// is parsed as Envoy's bootstrap, readme_test.go).
package picker
