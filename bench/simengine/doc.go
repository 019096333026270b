// Package simengine is a simulated vLLM/SGLang engine worker for tests,
// demos and load runs of kvrouter. It publishes the real wire format
// (messages/wire/README.md) over a real ZeroMQ PUB socket, serves the
// replay protocol on a ROUTER socket, and keeps a finite prefix cache with LRU
// eviction, so the BlockStored / BlockRemoved / AllBlocksCleared stream it
// emits looks like an engine's under memory pressure — and its Contents are
// the ground truth a router's index can be checked against.
//
// It is split like the rest of kvrouter: a pure, deterministic core and a
// thin I/O edge.
//
//   - Cache (cache.go, lru.go): token blocks keyed by engine block hash,
//     capacity in blocks, LRU eviction of leaves only, so the cache is always
//     prefix-closed. Serving a request returns the events it caused. No
//     sockets, no goroutines, no clock: the same requests give the same
//     events.
//   - Encoder (encode.go): events → one msgpack batch payload in the vLLM map
//     (≥ 0.26), vLLM positional (≤ 0.25) or SGLang encoding.
//   - Engine (engine.go, replay.go): the edge. A PUB socket publishing
//     [topic, seq, payload], a replay ROUTER with a bounded buffer, and fault
//     hooks (dropped seqs, restarts) for listener tests.
//   - Drivers (driver.go, trace.go) produce prompts: RandomDriver from a
//     seeded pool of shared prefixes, TraceDriver from Mooncake JSONL traces;
//     Loop reads a driver into memory and replays its prompts in a loop. Engine.Run
//     (run.go) paces a driver against an engine, by requests/s, by the
//     trace's timestamps or by stored blocks/s (a steady ingest).
//   - The OpenAI surface (openai.go) serves HTTP requests from the cache;
//     with HTTPOptions.Disagg (disagg.go) it is the prefill or the decode
//     half of a disaggregated pair speaking vLLM's, SGLang's or
//     TensorRT-LLM's transfer fields, the pair sharing an in-process
//     Transfer that moves the prompt (not KV bytes) and records every
//     request that breaks the protocol.
//   - With HTTPOptions.Prefill (prefill.go) the surface prefills one
//     request at a time at a token rate; a request's first token waits for
//     its prefill's end and its KV events are published a publish
//     interval after it, in serve order (kvrouter demo's engines).
//
// # Engine block hashes
//
// Like vLLM, a block's engine hash chains its parent's: block i's hash is
// XXH3-64(le64(hash[i-1]) ‖ u32le(tokens of block i), HashSeed). The first
// block's "parent" is a root value derived from HashSeed and the request's
// LoRA name and cache salt (vLLM's NONE_HASH plus its extra keys), so blocks
// of different namespaces never share a hash. Engines with the same HashSeed
// give the same prefix the same hashes (vLLM with PYTHONHASHSEED set);
// different seeds give unrelated hashes, as separate vLLM processes do. The
// hashes are opaque to kvrouter, which recomputes its own from the tokens.
//
// # Eviction rule
//
// Only complete blocks are cached. The LRU list is kept so that every cached
// block sits behind (closer to eviction than) its parent: a request moves its
// cached prefix to the front in chain order and inserts its new blocks right
// after their parent. The tail is therefore always a leaf, eviction takes the
// tail, and the cache stays prefix-closed: a block is held only while its
// parent is. A request never evicts its own prefix; one whose chain is longer
// than the capacity stores only its first CapacityBlocks blocks.
package simengine
