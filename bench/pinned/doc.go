// Package pinned is kvrouter-bench's pinned, out-of-process /route load
// (`kvrouter-bench pinned`): the router under test next to its floor, each
// alone on a core, under a constant offered load; and its ingest alone
// (`kvrouter-bench pinned-ingest`, "Ingest" below).
//
// # Processes and cores
//
// The router under test is its own `kvrouter serve` process, started with
// `taskset -c RouterCPU` (so its GOMAXPROCS is 1). The engines are
// `kvrouter sim` processes on LoadCPU: each replays the Mooncake trace
// (builtin:conversation, 16 tokens per hash id) on its own LRU cache,
// paced by stored blocks (--block-rate: Ingest/Engines each) and looped,
// engine i starting i/Engines into the trace so the engines hold different
// slices; they publish real KV events over ZeroMQ, and serve subscribes to
// all of them (--worker). The engines run at nice 19 (EngineNice): they
// take what the generator leaves of the core, so a core too small for both
// shows as ingest below the offered rate (the table's engines blocks/s),
// not as a late generator. The generator is this process, pinned to LoadCPU
// with `taskset -a -p` (every thread, and the ones started later), at
// GOMAXPROCS 1. Without taskset everything runs unpinned and the table's
// header says so.
//
// Pinning gives a process its core's share, not the core: on a machine
// shared with other jobs, they run on both cores too. Config.Nice (--nice,
// e.g. -15; below 0 needs CAP_SYS_NICE) runs the generator, the router and
// the floor at a raised priority so that the point measures them rather
// than the neighbours; the engines keep their own nice value.
//
// # The floor
//
// The floor is a plain net/http server (FloorHandler; `kvrouter-bench
// floor-server`) pinned to RouterCPU like the router: its handler checks
// the content type, decodes the same /route JSON body with encoding/json
// and answers a fixed small JSON. It is measured first at each ingest
// rate, with the engines already running (they publish to no subscriber
// then), by the same generator at the same rates; then it stops and the
// router starts on the same core. What the router costs beyond the floor
// is its own: the index, the actors, load bookkeeping, its JSON.
//
// # Offered load and latency
//
// The generator is vegeta's attacker (github.com/tsenart/vegeta/v12, as a
// library) driven by schedule, a constant-rate pacer: request n is due at
// start + n/rate, whatever the answers do (open loop; vegeta starts more
// workers when all are busy, up to MaxConns: DefaultMaxConns, not
// vegeta's 4,096, which piles thousands of connections onto a stalled
// server). Latency is measured from the
// due time, not from when the generator got round to sending: vegeta
// stamps each result with its sequence number and the time it began, the
// harness computes the due time from the sequence number and the end time
// from the stamp plus vegeta's latency. A request sent late (the generator
// or its core busy, every worker taken) carries its whole wait, so there
// is no coordinated omission; the table shows that wait apart as the send
// lag. The plan ends by count, not by time: a generator running late
// still sends every request of the plan, late, instead of dropping the
// ones it had no time for. Requests due in the first Warmup of a point
// (connections opening) are sent but not measured; failures (non-200,
// timeouts) are counted apart, by reason, never as latencies.
//
// The generator's client is leanTransport (transport.go), not net/http's
// Transport: vegeta's attacker, pacer and results as they are, but each
// request written in one write and its answer read on the worker's own
// goroutine. net/http's client cost the load core ~90 µs a request (two
// goroutines per connection, every request handed across both), so the
// load core saturated at ~5k req/s with the engines; the servers see the
// same keep-alive HTTP/1.1 either way.
//
// Bodies are the trace's prompts with the engines' token expansion, so
// routes walk real index paths; they carry no request_id (the router draws
// one and books the request's load, which is never freed: the load
// bookkeeping fills to its cap and evicts the oldest, as under clients that
// never call free).
//
// # Ingest and the router falling behind
//
// The engines' status lines (stored=N, every 200 ms) give the blocks/s they
// stored during each point. Before its points the router waits until every
// rank is exact and holds Fill × Capacity blocks (or FillTimeout passes;
// the report says how full it got). Replays and resyncs counted by the
// router during a point mean it fell behind the engines (a PUB dropped
// past its high-water mark and the gap was repaired, or the state was
// dropped).
//
// # CPU per request
//
// Latency on a loaded machine measures the neighbours too; CPU time does
// not. Each point reads the server's (floor's or router's) user + system
// time from /proc/PID/stat, the engines' likewise and the generator's
// own from getrusage, before and after: the table's cpu µs/ok is the
// server's CPU per request answered 200 over the whole point (what it
// spent on refused or shed requests counts against the ones it served),
// ×cpu the router's over the floor's, and load core the generator's and
// the engines' share of LoadCPU (near 100 %: that core, not the server,
// bounds the point).
//
// # Profile
//
// Config.RouterProfile takes a CPU profile of the router process over the
// measured part of one point (serve --pprof-listen on loopback, the
// profile fetched from it), for `go tool pprof`.
//
// # Ingest
//
// RunIngest measures what the router's ingest path — ZeroMQ → listener →
// normalizer → coalescer → index — takes on its own core. The router is
// `kvrouter serve` under `taskset -c RouterCPU`; the engines are
// Publishers replay publishers (`kvrouter sim --pre-encode`) under
// `taskset -c LoadCPU`. A replay publisher first serves the Mooncake trace
// (16 tokens per hash id, publisher i starting i/Publishers into it,
// looped) on an LRU cache of Capacity blocks without publishing, encoding
// each batch in vLLM's map encoding until PreEncode stored blocks are
// encoded, then an AllBlocksCleared; then it publishes those payloads in a
// loop as vLLM does — [topic, 8-byte big-endian seq, msgpack payload], a
// fresh seq each, kept in its replay buffer and served on its replay
// ROUTER, its PUB dropping past HWM messages — paced by stored blocks
// (its share of the point's rate; 0 is flat out). Sending costs it a
// ZeroMQ send per batch and nothing per block, so the other core offers
// far more than a simulated engine that hashes, caches and encodes as it
// goes (~5–9 µs per block). Each pass starts from an empty cache (the
// clear), so the router sees what an engine serving those prompts from
// empty emits, over and over.
//
// Each offered rate gets fresh publishers (recorded, publishing), then a
// fresh router subscribed to all of them (--worker i=PUB,replay=ROUTER);
// once every rank is exact (its first replay, of each publisher's buffer,
// done), Warmup unmeasured, then Duration measured: the router's
// kvrouter_index_stored_blocks_total (blocks of the stored events its
// index applied), seq gaps, replays, resyncs, dropped messages and lost
// batches from its /metrics at both ends (a scrape an actor did not
// answer in time is retried, up to 5; after that the point's figures are
// unknown); its CPU time from
// /proc/PID/stat (user + system, every thread; robust on a shared
// machine, where the router's share of its core varies); the
// publishers' sent blocks from their status lines (sent=N every 100 ms).
// IngestConfig.Nice (--nice) sets the harness's, the router's and the
// publishers' nice value as Config.Nice does for the route load.
// The router kept up when it applied at least 95 % of what was sent
// without a gap or a dropped state. The router's CPU seconds per million
// blocks say what it would apply with a core to itself; a router that
// got only part of its core shows applied below sent and a low CPU share,
// not a slow path.
//
// Layout: measure.go (the schedule and the statistics, pure), bodies.go,
// floor.go, table.go (pure); attack.go (vegeta), transport.go (its
// client), cpu.go (CPU time), procs.go (processes, taskset, nice, the
// router's HTTP), profile.go, run.go (the sequence); ingest.go and
// ingest_table.go (the ingest mode).
package pinned
