// Package pdtransfer builds the request bodies of a prefill/decode split:
// the fields each engine's disaggregated serving expects on its prefill
// leg and its decode leg, and what the decode leg takes from the prefill
// leg's answer. Plain Go over JSON bodies, no I/O (the proxy sends the
// legs); the randomness of a room or request id comes from an io.Reader
// the caller gives (crypto/rand in production, fixed bytes in tests).
//
// # The rules
//
// Every field a body does not mention below goes to the engines as the
// client wrote it (Body keeps each top-level value as written, its
// whitespace compacted; the top-level keys are written back sorted).
//
// Client bodies first: kv_transfer_params, bootstrap_host, bootstrap_port,
// bootstrap_room and disaggregated_params (ClientFields) are the proxy's
// to write. A client that sends one could make a decode engine pull KV
// from an address of its choosing, or turn its request into half of a
// transfer; Body.Strip removes them from every request before it is
// routed, split or not (the proxy counts each).
//
// vLLM with a KV connector (NIXL, Mooncake and the like):
//   - prefill leg: the client's body with kv_transfer_params
//     {"do_remote_decode": true, "do_remote_prefill": false,
//     "remote_engine_id": null, "remote_block_ids": null, "remote_host":
//     null, "remote_port": null}, "stream": false, "max_tokens": 1 (and
//     "max_completion_tokens": 1 when the client set that field), without
//     stream_options, min_tokens, min_completion_tokens (a one-token leg
//     cannot honour them; the decode leg keeps them). The answer is one
//     whole JSON object.
//   - decode leg: the client's body, unchanged but for kv_transfer_params
//     set to the object the prefill answer carries at its top level
//     (do_remote_prefill true, remote_engine_id, remote_block_ids,
//     remote_host, remote_port, remote_request_id, tp_size, … — passed on
//     as returned, never read). An answer without it, or with null or {}
//     (the connector handed nothing over), is ErrNoParams.
//
// SGLang (its model gateway's PD router):
//   - both legs: the client's body plus bootstrap_host, bootstrap_port
//     (from the prefill worker's registration: where its bootstrap server
//     listens; the port null when none is registered, so the engine uses
//     its default) and bootstrap_room, a random integer in [0, 2^63) drawn
//     per request, the same on both legs: the decode engine finds the
//     prefill engine's KV by it. The legs go out at once; the client gets
//     the decode leg's answer, the prefill leg's is read and dropped.
//
// TensorRT-LLM (its disaggregated server, ctx-first):
//   - prefill (context) leg: the client's body with disaggregated_params
//     {"request_type": "context_only", "disagg_request_id": ID}, "stream":
//     false, without stream_options. ID is random in [2^40, 2^63): the
//     engine's global request ids, above the range it keeps for its local
//     ones. max_tokens is left alone (the context server stops after its
//     first token).
//   - decode (generation) leg: the client's body with
//     disaggregated_params set to the prefill answer's
//     choices[0].disaggregated_params (ctx_request_id, first_gen_tokens,
//     opaque state, …) with request_type "generation_only", and the
//     prompt replaced by the answer's prompt_token_ids ("prompt" for
//     completions, "prompt_token_ids" for chat). An answer with other
//     than one choice, without params, without ctx_request_id or with
//     another disagg_request_id is refused; one whose choice finished
//     (finish_reason other than "length" or "not_finished": the context
//     server stopped at its first token) is ErrFinished — there is nothing
//     for a generation leg to continue.
//
// # Where the field names come from
//
// Checked against the engines' source (read, not copied):
//   - vLLM: tests/v1/kv_connector/nixl_integration/toy_proxy_server.py
//     (vllm-project/vllm 030ea52effcb05071543c8c42b8f0145e94cee43), the
//     proxy vLLM tests its NIXL connector with; the returned params in
//     vllm/distributed/kv_transfer/kv_connector/v1/nixl/scheduler.py
//     (request_finished, c8fac58bfd9fa6b2935b9d71675f0ca79db9850f).
//   - SGLang: sgl-model-gateway/src/routers/http/pd_types.rs
//     (RequestWithBootstrap, generate_room_id; sgl-project/sglang
//     106f37cea63a70dea91958cb633ccbd87c932d40) and pd_router/dispatch.rs
//     (03744dbedc69f4db84d0a6ae6d4400ce252bb6d8): both legs at once.
//   - TensorRT-LLM: tensorrt_llm/serve/openai_disagg_service.py
//     (_get_ctx_request, _get_gen_request, _verify_ctx_response;
//     NVIDIA/TensorRT-LLM 00bb903d965ffe9710a457d5848065d7d1b8f60a) and
//     the disagg request id layout in its router utilities.
//
// # Not done here
//
// TensorRT-LLM's disaggregated server answers a request its context
// server finished with the context response itself; kvrouter's proxy
// serves it on the decode worker alone instead (ErrFinished), which costs a
// second prefill but gives the client its own answer shape. SGLang's batch bodies (arrays of
// prompts, one room per prompt) and its /generate endpoint are not split.
// None of this was run against a real engine: the tests use the simulated
// engines of bench/simengine, which check these same fields.
package pdtransfer
