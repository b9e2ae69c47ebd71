package doctor

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// unitOf names the unit a file of this package belongs to: a detector's
// files are detect_NAME.go and detect_NAME_PART.go (unit NAME); every
// other file is the doctor's core ("").
func unitOf(file string) string {
	base := strings.TrimSuffix(filepath.Base(file), ".go")
	name, ok := strings.CutPrefix(base, "detect_")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "_")
	return name
}

// crossings lists every use, in the package's non-test files, of a
// package-level name (function, method, variable, constant, type, field
// of a package type) that another unit declares where the using unit may
// not see it: a detector may use only the core and its own files, and the
// core no detector.
func crossings(t *testing.T) []string {
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// Imports are not resolved: only this package's own names matter,
	// and they resolve without them.
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: noImports{}, Error: func(error) {}}
	tpkg, _ := conf.Check("doctor", fset, files, info)
	var out []string
	seen := map[string]bool{}
	check := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != tpkg || !obj.Pos().IsValid() {
			return
		}
		// Package-level names, methods and fields only: locals stay in
		// their function.
		if obj.Parent() != nil && obj.Parent() != tpkg.Scope() {
			return
		}
		from, to := fset.Position(at).Filename, fset.Position(obj.Pos()).Filename
		uf, ut := unitOf(from), unitOf(to)
		if ut == "" || uf == ut {
			return
		}
		msg := fmt.Sprintf("%s uses %s of %s", filepath.Base(from), obj.Name(), filepath.Base(to))
		if !seen[msg] {
			seen[msg] = true
			out = append(out, msg)
		}
	}
	for id, obj := range info.Uses {
		check(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		check(sel.Sel.Pos(), s.Obj())
	}
	sort.Strings(out)
	return out
}

type noImports struct{}

func (noImports) Import(path string) (*types.Package, error) {
	return nil, fmt.Errorf("not resolved: %s", path)
}

// A detector is one unit: it uses the doctor's core and its own files,
// never another detector's, and the core uses no detector (it finds them
// in the registry). So a detector can be added, changed or removed
// without reading any other.
func TestDetectorsIndependent(t *testing.T) {
	for _, c := range crossings(t) {
		t.Error(c)
	}
}

// The doctor is a library: nothing it imports loads a probe, runs a
// command or reads a capture (internal/checkup does). The allowed list
// is the event, process, count and host-fact level; a new import is a
// decision to make here, not by accident.
func TestDoctorIsALibrary(t *testing.T) {
	// dns decodes the query bytes an event carries: the event level.
	allowed := map[string]bool{"audit": true, "dns": true, "event": true, "host": true, "proc": true, "stat": true, "units": true}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const own = "github.com/sysray/sysray/internal/"
	for _, path := range pkg.Imports {
		if rest, ok := strings.CutPrefix(path, own); ok && !allowed[rest] {
			t.Errorf("the doctor imports %s: it reads events and facts; running it belongs in internal/checkup", path)
		}
	}
}
