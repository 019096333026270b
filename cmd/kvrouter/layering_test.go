package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/kvrouter/kvrouter"

// listedPackage is the part of `go list -json` the layering tests read.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs `go list -json args...` in the module and decodes its
// stream of package objects.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layering tests need the go command: %v", err)
	}
	cmd := exec.Command(goCmd, append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
}

// underCmd reports whether a package path is one of the module's cmd/
// packages (test variants, "pkg [pkg.test]", included).
func underCmd(path string) bool {
	return strings.HasPrefix(path, module+"/cmd/")
}

// cmdImports lists every "importer -> imported" edge from a package
// outside cmd/ to one under it: cmd/ holds the binaries' flag parsing,
// which nothing else may depend on.
func cmdImports(pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		if underCmd(p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if underCmd(imp) {
				bad = append(bad, p.ImportPath+" -> "+imp)
			}
		}
	}
	return bad
}

// TestNothingOutsideCmdImportsCmd: no package of the module outside cmd/,
// tests included, imports a package under cmd/.
func TestNothingOutsideCmdImportsCmd(t *testing.T) {
	pkgs := goList(t, "-test", module+"/...")
	if len(pkgs) < 10 || !slices.ContainsFunc(pkgs, func(p listedPackage) bool { return p.ImportPath == module+"/actors/service" }) {
		t.Fatalf("go list found %d packages, not the module's (no actors/service)", len(pkgs))
	}
	if bad := cmdImports(pkgs); len(bad) > 0 {
		t.Errorf("packages outside cmd/ import cmd/ (move what they need into a library package):\n%s", strings.Join(bad, "\n"))
	}
}

// The check catches an import of cmd/ from outside it, from a test
// variant too, and leaves cmd/'s own imports alone.
func TestCmdImportsFindsTheEdge(t *testing.T) {
	pkgs := []listedPackage{
		{ImportPath: module + "/cmd/kvrouter", Imports: []string{module + "/cmd/kvrouter/x", module + "/actors/service"}},
		{ImportPath: module + "/bench/loadgen", Imports: []string{"fmt", module + "/cmd/kvrouter/x"}},
		{ImportPath: module + "/bench [" + module + "/bench.test]", Imports: []string{module + "/cmd/kvrouter"}},
		{ImportPath: module + "/actors/service", Imports: []string{module + "/cmdline"}},
	}
	want := []string{module + "/bench/loadgen -> " + module + "/cmd/kvrouter/x",
		module + "/bench [" + module + "/bench.test] -> " + module + "/cmd/kvrouter"}
	if got := cmdImports(pkgs); !slices.Equal(got, want) {
		t.Errorf("cmdImports = %q, want %q", got, want)
	}
}

// linksPlotsOrChaos lists the packages among deps that the serving binary
// must not link: the plotting library and the chaos harness (both only
// kvrouter-bench's).
func linksPlotsOrChaos(deps []string) []string {
	var bad []string
	for _, d := range deps {
		if strings.HasPrefix(d, "gonum.org/v1/plot") || d == module+"/bench/chaos" || strings.HasPrefix(d, module+"/bench/chaos/") {
			bad = append(bad, d)
		}
	}
	return bad
}

// TestServingBinaryLinksNoPlotsOrChaos: cmd/kvrouter (serve, demo, sim,
// tap, ...) links neither gonum's plot packages nor bench/chaos; the
// benchmark binary, which does, shows the check sees them.
func TestServingBinaryLinksNoPlotsOrChaos(t *testing.T) {
	pkgs := goList(t, module+"/cmd/kvrouter", module+"/cmd/kvrouter-bench")
	if len(pkgs) != 2 {
		t.Fatalf("go list gave %d packages, want 2", len(pkgs))
	}
	if bad := linksPlotsOrChaos(pkgs[0].Deps); len(bad) > 0 {
		t.Errorf("%s links %s (move what needs them to cmd/kvrouter-bench)", pkgs[0].ImportPath, strings.Join(bad, ", "))
	}
	if bad := linksPlotsOrChaos(pkgs[1].Deps); !slices.Contains(bad, "gonum.org/v1/plot") || !slices.Contains(bad, module+"/bench/chaos") {
		t.Errorf("%s: the check found %q, want the plot library and bench/chaos", pkgs[1].ImportPath, bad)
	}
}
