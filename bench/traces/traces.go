// Package traces ships the two public Mooncake request traces inside the
// binary, so the demo, the simulators, the benchmarks and the tests run
// from any directory and from an installed binary with nothing beside it.
// README.md beside this file gives their source, licence and format.
//
// A trace reference names a trace wherever a flag or a config takes one:
// "builtin:conversation" or "builtin:synthetic" is an embedded trace,
// anything else a file path (gunzipped when it ends in ".gz"). OpenRef
// resolves one; Open opens an embedded trace by name.
package traces

import (
	"compress/gzip"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The embedded traces, gzip-compressed (gzip -9 -n of the published files).
//
//go:embed conversation.jsonl.gz synthetic.jsonl.gz
var files embed.FS

const (
	// Conversation is the multi-turn chat trace: 12,031 requests over
	// about an hour, most sharing a long system prompt and earlier turns.
	Conversation = "conversation"
	// Synthetic is the synthetic workload trace: 3,993 requests with
	// longer, less repetitive prompts.
	Synthetic = "synthetic"
	// BuiltinPrefix marks a trace reference to an embedded trace
	// ("builtin:conversation").
	BuiltinPrefix = "builtin:"
)

// Names lists the embedded traces.
func Names() []string { return []string{Conversation, Synthetic} }

// Open returns embedded trace name (Conversation or Synthetic) as JSONL,
// decompressed. The caller closes it.
func Open(name string) (io.ReadCloser, error) {
	f, err := files.Open(name + ".jsonl.gz")
	if err != nil {
		return nil, fmt.Errorf("traces: no built-in trace %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return gunzip(f, BuiltinPrefix+name)
}

// OpenRef opens trace reference ref: "builtin:NAME" is embedded trace
// NAME, anything else a file path, decompressed when it ends in ".gz".
// The caller closes it.
func OpenRef(ref string) (io.ReadCloser, error) {
	if name, ok := strings.CutPrefix(ref, BuiltinPrefix); ok {
		return Open(name)
	}
	f, err := os.Open(ref)
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	if !strings.HasSuffix(ref, ".gz") {
		return f, nil
	}
	return gunzip(f, ref)
}

// Label is a trace reference's short name for reports: the embedded
// trace's name, or the file's base name without its extensions, a
// "mooncake_" prefix and a "_trace" suffix ("conversation" for
// mooncake_conversation_trace.jsonl).
func Label(ref string) string {
	if name, ok := strings.CutPrefix(ref, BuiltinPrefix); ok {
		return name
	}
	n := filepath.Base(ref)
	n = strings.TrimSuffix(n, ".gz")
	n = strings.TrimSuffix(n, filepath.Ext(n))
	return strings.TrimSuffix(strings.TrimPrefix(n, "mooncake_"), "_trace")
}

// gunzip wraps f in a gzip reader whose Close closes both.
func gunzip(f io.ReadCloser, what string) (io.ReadCloser, error) {
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("traces: gunzip %s: %w", what, err)
	}
	return &gzipFile{Reader: z, f: f}, nil
}

// gzipFile is a decompressing reader over an open file.
type gzipFile struct {
	*gzip.Reader
	f io.Closer
}

// Close closes the gzip stream (reporting a bad checksum seen so far is
// Read's job) and the file under it.
func (g *gzipFile) Close() error {
	return errors.Join(g.Reader.Close(), g.f.Close())
}
