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

// Command apisurface writes down the public surface of the module: for each
// package a library user imports (everything outside internal/, test/, hack/
// and cmd/), the exported identifiers with their signatures, one a line, in
// api-surface/<package>.txt. Its test fails when the code's surface differs
// from what the files record, so that a change to what the module promises is
// a deliberate act: run `make api-surface` and commit the files with it.
//
// Usage, from the module's root: go run ./hack/apisurface
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the module's root")
	flag.Parse()
	if err := write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "apisurface:", err)
		os.Exit(1)
	}
}

// write regenerates root/api-surface: a file for each public package, and
// none for a package that is gone.
func write(root string) error {
	want, err := Record(root)
	if err != nil {
		return err
	}
	dir := filepath.Join(root, Dir)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for rel, text := range want {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Record returns the files the surface of the module under root calls for,
// by their path relative to root.
func Record(root string) (map[string]string, error) {
	pkgs, err := PublicPackages(root)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, pkg := range pkgs {
		lines, err := Surface(filepath.Join(root, filepath.FromSlash(pkg)))
		if err != nil {
			return nil, err
		}
		text := ""
		if len(lines) > 0 {
			text = strings.Join(lines, "\n") + "\n"
		}
		files[Dir+"/"+pkg+".txt"] = text
	}
	return files, nil
}

// Recorded returns the files under root/api-surface, by their path relative
// to root.
func Recorded(root string) (map[string]string, error) {
	files := map[string]string{}
	dir := filepath.Join(root, Dir)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == dir {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return files, err
}
