// Package messages is the one contract every kvrouter stage agrees on: the
// typed KV-cache events that leave the normalizer (PlacementEvent), the events
// the indexer applies (RouterEvent), the pipeline messages between actors, and
// the closed set of reasons an input can be rejected for.
//
// Every type here is plain data (no pointers to shared state, no channels, no
// methods with side effects) so that it can be copied between actors and
// mapped one-to-one onto the protobuf messages that cross hosts
// (cluster/clusterpb).
//
// Sub-packages:
//   - wire:        decode an engine's msgpack batch into raw wire events
//     (README.md there describes the engines' formats);
//   - engine:      per-engine adapters (vllm, sglang, trtllm) and their registry;
//   - blockhash:   the local block-hash scheme shared by events and route requests;
//   - routerevent: the RouterEvent encoding republished for external consumers;
//   - tracectx:    trace context carried in messages ⇄ OpenTelemetry;
//   - api:         the front ends' contract with the backend;
//   - serving:     a worker's serving address;
//   - tokenizer:   prompt text → the engine's token ids.
package messages
