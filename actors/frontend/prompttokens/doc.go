// Package prompttokens turns the prompt of an OpenAI request — completions
// text or token ids, or chat messages with their tools and template
// arguments — into the token ids the engine will see, which is what the
// router hashes into blocks. Every answer says where its ids came from
// (Source): the request itself, kvrouter's local tokenizer
// (messages/tokenizer, loaded with --tokenizer), or the engine.
//
// Rules:
//   - Completion ids in the request are used as they are.
//   - Completion text goes through the local tokenizer when the model has
//     one (no round trip); otherwise through the engine's /tokenize.
//   - Chat is rendered by the engine — its chat template, tools and
//     chat_template_kwargs — never by a guess here: a template applied
//     differently, or tools left out, gives other ids and a prefix that
//     never matches.
//   - With no way to get ids (no tokenizer, no engine, an engine too slow
//     or failing), the answer is FromNone with a reason; the caller routes
//     by load, and the reason is counted (kvrouter_prompt_tokens_total).
package prompttokens
