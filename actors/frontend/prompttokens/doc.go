// Package prompttokens turns the prompt of an OpenAI request — completions
// text or token ids, or chat messages with their tools and template
// arguments — into the token ids the engine will see, which is what the
// router hashes into blocks. Every answer says where its ids came from
// (Source): the request itself, kvrouter's local tokenizer
// (messages/tokenizer, loaded with --tokenizer), or the engine.
//
// Rules (Resolver):
//   - Completion ids in the request are used as they are.
//   - Completion text goes through the local tokenizer when the model has
//     one (no round trip), unless the parity guard found it disagreeing
//     with the engine; otherwise through the engine.
//   - Chat is rendered by the engine — its chat template, tools and
//     chat_template_kwargs — never by a guess here: a template applied
//     differently, tools left out or the first message only give other ids
//     and a prefix that never matches (the failures other routers' users
//     report).
//   - With no way to get ids (no tokenizer, no engine, an engine slower
//     than Options.Timeout or failing), the answer is FromNone with a
//     reason; the caller routes by load, and the reason is counted
//     (kvrouter_prompt_tokens_total{source,reason}).
//
// The engine client (Engine) speaks vLLM's and SGLang's POST /tokenize
// (completion and chat forms; the same JSON in both) and vLLM's POST
// /v1/completions/render and /v1/chat/completions/render, which exist only
// when vLLM runs the render endpoints: a 404 there is remembered per engine
// and /tokenize used from then on. The engines of a model come from the
// registrations' serving endpoints (Directory, refreshed by kvrouter serve).
//
// Cache: engine answers are kept by a 128-bit hash of what was asked
// (model, kind, the template inputs byte for byte), least recently used
// out, bounded by the bytes of the ids held (Options.CacheBytes). A
// repeated prompt — a retried request, the same system prompt and first
// turn from many clients — costs no round trip (~1 µs, bench/README.md). A
// conversation's next turn is a new text and asks the engine again: chat
// templates are not compositional, so a cached prefix cannot be extended
// without the engine.
//
// Parity guard (Guard): when a model has a local tokenizer and engines, a
// probe set (Probes) is tokenized both ways when an engine appears and
// periodically. A mismatch is logged, counted
// (kvrouter_tokenizer_parity_mismatch), shown as a /workers warning on the
// engine's ranks, and the engine wins: that model's text goes to the engine
// until a later check finds parity. The guard also reads the block size the
// engine runs with — vLLM exports it as a label of vllm:cache_config_info
// on GET /metrics, SGLang as page_size in GET /get_server_info — and warns
// (kvrouter_engine_block_size_mismatch) when it differs from the registered
// one: every prompt block would then miss the engine's events. That cannot
// be corrected here; it is reported so the registration is fixed.
//
// enginefake serves the same endpoints, tokenizing with a real tokenizer
// (Qwen3's in the tests), for the client tests and for simulated engines
// (simengine's OpenAI surface with HTTPOptions.Tokens). The end-to-end
// tests run against those: a multi-turn chat routed to the worker holding
// its prefix, on the service's route path (e2e_test.go) and through the
// OpenAI proxy, where the engine that served turn 1 reports turn 1's blocks
// cached for turn 2 (proxy_e2e_test.go); completion text, the engine's ids
// and the blocks its KV events carry all hash alike. No real vLLM or
// SGLang ran in these tests; the request and answer shapes follow their
// sources.
package prompttokens
