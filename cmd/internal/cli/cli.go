// Package cli holds what kvrouter's binaries (cmd/kvrouter,
// cmd/kvrouter-bench) share on the command line: flag sets whose --help
// prints once, on stdout, and the parsers of comma-separated flag values.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// NewFlags returns a command's flag set: its usage is help followed by the
// flags; errors go to stderr (ParseFlags sends --help to stdout). name is
// the command as typed ("kvrouter serve", "kvrouter-bench") and prefixes
// ParseFlags' messages.
func NewFlags(name, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args; done reports that the command must return code
// now (after --help: 0; on a flag error or a stray argument: 2).
func ParseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
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
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, true
	}
	return 0, false
}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// FloatList parses a comma-separated list of numbers for flag name.
func FloatList(name, v string) ([]float64, error) {
	var out []float64
	for _, s := range SplitList(v) {
		x, err := ParseFloat(name, s)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// ParseFloat parses one number for flag name.
func ParseFloat(name, v string) (float64, error) {
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", name, v)
	}
	return x, nil
}

// IntList parses a comma-separated list of integers.
func IntList(v string) ([]int, error) {
	var out []int
	for _, s := range SplitList(v) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// TraceRefHelp says what a --trace flag takes.
const TraceRefHelp = "builtin:conversation or builtin:synthetic (the Mooncake traces built into kvrouter), or a JSONL file path"

// FlagSet reports whether the flag name was given on the command line.
func FlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
