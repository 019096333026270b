package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kvrouter/kvrouter/cmd/internal/cli"
)

// presetFlags are the flags of a pinned mode that override fields of its
// preset config C (the default or --quick): apply sets, on the preset the
// run starts from, only the flags given on the command line.
type presetFlags[C any] struct {
	fs  *flag.FlagSet
	def C // the default preset: the flags' defaults shown by --help
	set map[string]func(*C) error
}

func newPresetFlags[C any](fs *flag.FlagSet, def C) *presetFlags[C] {
	return &presetFlags[C]{fs: fs, def: def, set: map[string]func(*C) error{}}
}

// list is a comma-separated list of numbers.
func (p *presetFlags[C]) list(name, usage string, field func(*C) *[]float64) {
	v := p.fs.String(name, "", usage)
	p.set[name] = func(c *C) (err error) { *field(c), err = cli.FloatList("--"+name, *v); return err }
}

func (p *presetFlags[C]) num(name, usage string, field func(*C) *int) {
	v := p.fs.Int(name, *field(&p.def), usage)
	p.set[name] = func(c *C) error { *field(c) = *v; return nil }
}

func (p *presetFlags[C]) span(name, usage string, field func(*C) *time.Duration) {
	v := p.fs.Duration(name, *field(&p.def), usage)
	p.set[name] = func(c *C) error { *field(c) = *v; return nil }
}

func (p *presetFlags[C]) flag(name, usage string, field func(*C) *bool) {
	v := p.fs.Bool(name, *field(&p.def), usage)
	p.set[name] = func(c *C) error { *field(c) = *v; return nil }
}

// apply sets the given flags on cfg, in command-line order; the first
// bad value is the error.
func (p *presetFlags[C]) apply(cfg *C) error {
	var err error
	p.fs.Visit(func(f *flag.Flag) {
		if set, ok := p.set[f.Name]; ok && err == nil {
			err = set(cfg)
		}
	})
	return err
}

// kvrouterBinary is --kvrouter, or kvrouter beside this binary (self);
// an error when it is not there.
func kvrouterBinary(given, self string) (string, error) {
	if given == "" {
		given = filepath.Join(filepath.Dir(self), "kvrouter")
	}
	if _, err := os.Stat(given); err != nil {
		return "", fmt.Errorf("kvrouter binary: %v (make build, or --kvrouter)", err)
	}
	return given, nil
}

// writeReport prints a pinned mode's table and, when jsonPath is set,
// writes the report as JSON there too.
func writeReport(stdout io.Writer, jsonPath string, rep interface{ WriteTable(io.Writer) error }) error {
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonPath, b, 0o644)
}
