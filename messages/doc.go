// Package messages is the one contract every kvrouter stage agrees on: the
// typed KV-cache events that leave the normalizer (PlacementEvent), the events
// the indexer applies (RouterEvent), and the closed set of reasons an input can
// be rejected for.
//
// Every type here is plain data (no pointers to shared state, no channels, no
// methods with side effects) so that it can be copied between actors and, once
// the cluster lands, mapped one-to-one onto protobuf messages that cross hosts.
//
// Sub-packages hold the pure functions that produce these values:
//   - wire:      decode an engine's msgpack batch into raw wire events;
//   - blockhash: the local block-hash scheme shared by events and route requests;
//   - engine:    per-engine adapters (vllm, sglang, trtllm) and their registry.
package messages
