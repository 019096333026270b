// Command kvrouter is a KV-cache-aware router for LLM inference clusters.
// It is one binary with subcommands; run `kvrouter help` for the list. The
// benchmark and fault-injection harness is the separate kvrouter-bench
// (cmd/kvrouter-bench), so this binary links no plotting or chaos code.
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one subcommand: run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"decode", "decode one engine KV-event batch from stdin and print each event as JSON", runDecode},
		{"sim", "run a simulated vLLM/SGLang engine publishing KV events over ZeroMQ", runSim},
		{"demo", "the router and simulated engines on loopback, driven by a Mooncake trace through /route", runDemo},
		{"serve", "run the router: KV-event listeners, the prefix index and the HTTP API", runServe},
		{"tap", "run the ingest pipeline against engines (or built-in simulated ones) and show each stream", runTap},
		{"tokenize", "print a prompt's token ids as JSON (local tokenizer.json, or the engine; --chat renders messages through the engine)", runTokenize},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kvrouter: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kvrouter — a KV-cache-aware router for vLLM, SGLang and TensorRT-LLM workers.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: kvrouter <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run `kvrouter <command> --help` for a command's flags.")
	fmt.Fprintln(w, "Benchmarks and fault-injection trials: kvrouter-bench --help (make build builds both).")
}
