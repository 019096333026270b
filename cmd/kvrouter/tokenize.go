package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/kvrouter/kvrouter/actors/frontend/prompttokens"
	"github.com/kvrouter/kvrouter/cmd/internal/cli"
	"github.com/kvrouter/kvrouter/messages/tokenizer"
)

const tokenizeHelp = `Usage: kvrouter tokenize [flags] < input

Prints the token ids of a prompt as one JSON array — the ids kvrouter
hashes into blocks when it routes that prompt.

Text (the default): stdin is UTF-8 text, taken whole (a trailing newline
is part of it). With --tokenizer it is tokenized locally, exactly as
kvrouter serve --tokenizer does; with --engine-url by the engine's
/tokenize (or /v1/completions/render); with both, the two must agree (on a
disagreement both are shown on stderr and the exit status is 1 — the
parity guard's check on one text).

Chat (--chat): stdin is an OpenAI "messages" JSON array. Only the engine
applies its chat template, so --engine-url is required: the messages (with
--tools and --chat-template-kwargs) are rendered by its
/v1/chat/completions/render, or /tokenize's chat form.

The tokenizer file is a Hugging Face tokenizer.json (plain or gzipped) of a
byte-level BPE model — Llama-3, Qwen2/Qwen3, gpt-oss; other kinds are
refused with the reason.

Examples:
  printf 'Hello world' | kvrouter tokenize --tokenizer tokenizer.json
  kvrouter tokenize --chat --engine-url http://10.0.0.5:8000 --model Qwen/Qwen3-8B < messages.json

Flags:
`

func runTokenize(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := cli.NewFlags("kvrouter tokenize", tokenizeHelp, stderr)
	path := fs.String("tokenizer", "", "tokenizer.json of the model (plain or .gz)")
	engineURL := fs.String("engine-url", "", "the engine's HTTP address (http://host:port), for --chat or to compare")
	model := fs.String("model", "default", "model name sent to the engine")
	chat := fs.Bool("chat", false, "stdin is an OpenAI messages JSON array, rendered by the engine")
	toolsFile := fs.String("tools", "", "with --chat: a file holding the request's tools JSON array")
	kwargs := fs.String("chat-template-kwargs", "", `with --chat: the chat_template_kwargs JSON object, e.g. {"enable_thinking":false}`)
	special := fs.Bool("special", true, "add the tokenizer's special tokens (BOS) as an engine does for a completion prompt")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline of the engine round trip")
	if code, done := cli.ParseFlags(fs, args, stdout, stderr); done {
		return code
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "kvrouter tokenize: "+format+"\n", a...)
		return 2
	}
	input, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return fail("reading stdin: %v", err)
	}
	// The deadline covers the engine round trip only, not loading a local
	// tokenizer file first.
	engineCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), *timeout)
	}
	var engine *prompttokens.Engine
	if *engineURL != "" {
		engine = prompttokens.NewEngine(prompttokens.BaseURL(*engineURL), nil)
	}
	var ids []uint32
	if *chat {
		if engine == nil {
			return fail("--chat needs --engine-url: the chat template is the engine's to apply")
		}
		c := prompttokens.Chat{Messages: input}
		if !json.Valid(input) {
			return fail("stdin is not a JSON messages array")
		}
		if *toolsFile != "" {
			if c.Tools, err = os.ReadFile(*toolsFile); err != nil || !json.Valid(c.Tools) {
				return fail("--tools %s: not a readable JSON file (%v)", *toolsFile, err)
			}
		}
		if *kwargs != "" {
			if c.ChatTemplateKwargs = json.RawMessage(*kwargs); !json.Valid(c.ChatTemplateKwargs) {
				return fail("--chat-template-kwargs is not JSON")
			}
		}
		ctx, cancel := engineCtx()
		defer cancel()
		if ids, err = engine.RenderChat(ctx, *model, c); err != nil {
			fmt.Fprintf(stderr, "kvrouter tokenize: engine: %v\n", err)
			return 1
		}
	} else {
		if !utf8.Valid(input) {
			return fail("stdin is not valid UTF-8")
		}
		if *path == "" && engine == nil {
			return fail("need --tokenizer PATH or --engine-url URL (see --help)")
		}
		var local, remote []uint32
		if *path != "" {
			tk, err := tokenizer.Load(*path)
			if err != nil {
				return fail("%v", err)
			}
			if local, err = tk.Encode(string(input), *special); err != nil {
				return fail("%v", err)
			}
			ids = local
		}
		if engine != nil {
			ctx, cancel := engineCtx()
			defer cancel()
			if remote, err = engine.TokenizeText(ctx, *model, string(input), *special); err != nil {
				fmt.Fprintf(stderr, "kvrouter tokenize: engine: %v\n", err)
				return 1
			}
			if ids == nil {
				ids = remote
			} else if !slices.Equal(local, remote) {
				fmt.Fprintf(stderr, "kvrouter tokenize: the local tokenizer and the engine disagree\nlocal:  %v\nengine: %v\n", local, remote)
				return 1
			}
		}
	}
	if ids == nil {
		ids = []uint32{}
	}
	out, _ := json.Marshal(ids)
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
}
