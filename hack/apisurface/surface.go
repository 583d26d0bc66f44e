/*
Copyright 2026 The Graduator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Dir is where the recorded surface lives, relative to the module's root:
// one file a public package, at the package's own path with .txt added.
const Dir = "api-surface"

// skipped are the directories whose packages a library user cannot or does
// not import: the machinery, the suites, the tools and the binaries.
var skipped = map[string]bool{"internal": true, "test": true, "hack": true, "cmd": true, "testdata": true, "bin": true, "dist": true}

// PublicPackages returns the directories, relative to root and with forward
// slashes, of the module's importable packages outside internal/, test/,
// hack/ and cmd/. A directory with a go.mod of its own is another module.
func PublicPackages(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel != "." {
			if skipped[d.Name()] || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			var none *build.NoGoError
			if asNoGo(err, &none) {
				return nil
			}
			return fmt.Errorf("read package %s: %w", rel, err)
		}
		if pkg.Name == "main" {
			return nil
		}
		dirs = append(dirs, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

func asNoGo(err error, target **build.NoGoError) bool {
	e, ok := err.(*build.NoGoError)
	if ok {
		*target = e
	}
	return ok
}

// Surface returns the exported identifiers of the package in dir, one line
// each, sorted: what a library user can name. Parameter names are left out,
// so renaming one changes nothing; a type, a field, a method or a constant
// added, removed or changed does.
func Surface(dir string) ([]string, error) {
	pkg, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("read package %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		files = append(files, f)
	}
	d, err := doc.NewFromFiles(fset, files, pkg.ImportPath)
	if err != nil {
		return nil, fmt.Errorf("read the documentation of %s: %w", dir, err)
	}
	s := &surface{fset: fset}
	s.decls(d.Consts, d.Vars, d.Funcs)
	for _, t := range d.Types {
		s.typ(t)
		// go/doc files a type's constructors and its constants and
		// variables under the type.
		s.decls(t.Consts, t.Vars, append(t.Funcs, t.Methods...))
	}
	sort.Strings(s.lines)
	return s.lines, nil
}

type surface struct {
	fset  *token.FileSet
	lines []string
}

func (s *surface) add(format string, args ...any) {
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

// node prints n on one line.
func (s *surface) node(n any) string {
	var b bytes.Buffer
	if err := printer.Fprint(&b, s.fset, n); err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func (s *surface) decls(consts, vars []*doc.Value, funcs []*doc.Func) {
	s.values("const", consts)
	s.values("var", vars)
	for _, f := range funcs {
		s.fn(f)
	}
}

func (s *surface) values(kind string, vs []*doc.Value) {
	for _, v := range vs {
		// In a constant group a spec without values repeats the type (and
		// the iota expression) of the one before it.
		var inherited ast.Expr
		for _, spec := range v.Decl.Specs {
			vs := spec.(*ast.ValueSpec)
			typ := vs.Type
			if typ == nil && len(vs.Values) == 0 {
				typ = inherited
			}
			inherited = typ
			for i, name := range vs.Names {
				if !name.IsExported() {
					continue
				}
				line := kind + " " + name.Name
				if typ != nil {
					line += " " + s.node(typ)
				}
				if kind == "const" && i < len(vs.Values) {
					line += " = " + s.node(vs.Values[i])
				}
				s.add("%s", line)
			}
		}
	}
}

func (s *surface) fn(f *doc.Func) {
	decl := f.Decl
	prefix := "func "
	if decl.Recv != nil && len(decl.Recv.List) > 0 {
		prefix = "method (" + s.node(decl.Recv.List[0].Type) + ") "
	}
	s.add("%s%s%s", prefix, decl.Name.Name, s.signature(decl.Type))
}

// signature prints a function type without its parameter names.
func (s *surface) signature(t *ast.FuncType) string {
	var b strings.Builder
	if t.TypeParams != nil {
		b.WriteString("[" + s.fields(t.TypeParams, true) + "]")
	}
	b.WriteString("(" + s.fields(t.Params, false) + ")")
	if t.Results != nil && len(t.Results.List) > 0 {
		results := s.fields(t.Results, false)
		if len(t.Results.List) == 1 && len(t.Results.List[0].Names) <= 1 {
			b.WriteString(" " + results)
		} else {
			b.WriteString(" (" + results + ")")
		}
	}
	return b.String()
}

// fields prints a parameter list, one type for each name; type parameters
// keep their names, since the constraints refer to them.
func (s *surface) fields(l *ast.FieldList, keepNames bool) string {
	if l == nil {
		return ""
	}
	var parts []string
	for _, f := range l.List {
		typ := s.node(f.Type)
		if keepNames {
			var names []string
			for _, n := range f.Names {
				names = append(names, n.Name)
			}
			parts = append(parts, strings.Join(names, ", ")+" "+typ)
			continue
		}
		n := len(f.Names)
		if n == 0 {
			n = 1
		}
		for range n {
			parts = append(parts, typ)
		}
	}
	return strings.Join(parts, ", ")
}

func (s *surface) typ(t *doc.Type) {
	for _, spec := range t.Decl.Specs {
		ts := spec.(*ast.TypeSpec)
		if !ts.Name.IsExported() {
			continue
		}
		name := ts.Name.Name
		if ts.TypeParams != nil {
			name += "[" + s.fields(ts.TypeParams, true) + "]"
		}
		if ts.Assign.IsValid() {
			s.add("type %s = %s", name, s.node(ts.Type))
			continue
		}
		switch u := ts.Type.(type) {
		case *ast.StructType:
			s.add("type %s struct", name)
			for _, f := range u.Fields.List {
				typ := s.node(f.Type)
				if len(f.Names) == 0 {
					s.add("type %s struct, embedded %s", name, typ)
					continue
				}
				for _, n := range f.Names {
					if n.IsExported() {
						s.add("type %s struct, %s %s", name, n.Name, typ)
					}
				}
			}
		case *ast.InterfaceType:
			s.add("type %s interface", name)
			for _, m := range u.Methods.List {
				if len(m.Names) == 0 {
					s.add("type %s interface, embedded %s", name, s.node(m.Type))
					continue
				}
				for _, n := range m.Names {
					if !n.IsExported() {
						s.add("type %s interface, unexported method %s", name, n.Name)
						continue
					}
					if ft, ok := m.Type.(*ast.FuncType); ok {
						s.add("type %s interface, %s%s", name, n.Name, s.signature(ft))
					}
				}
			}
		default:
			s.add("type %s %s", name, s.node(ts.Type))
		}
	}
}
