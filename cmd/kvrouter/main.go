// Command kvrouter is a KV-cache-aware router for LLM inference clusters.
// It is one binary with subcommands; run `kvrouter help` for the list.
package main

import (
	"errors"
	"flag"
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
		{"bench", "measure ingest, route latency, memory and routing quality on Mooncake traces (simulated engines)", runBench},
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

// newFlags returns a subcommand's flag set: its usage is help followed by the
// flags; errors go to stderr (parseFlags sends --help to stdout).
func newFlags(name, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; done reports that the command must return code
// now (after --help: 0; on a flag error or a stray argument: 2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	// The flag package prints the usage itself on --help and on errors (to
	// stderr); it is printed here instead, once: --help to stdout.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			usage()
			return 0, true
		}
		usage() // after the flag package's error line, on stderr
		return 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kvrouter %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
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
}
