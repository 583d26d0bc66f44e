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
	"sort"
	"strings"
	"testing"
)

const root = "../.."

// TestSurfaceRecorded fails when an exported identifier of a public package
// is added, removed or changed without api-surface/ recording it.
func TestSurfaceRecorded(t *testing.T) {
	want, err := Record(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Recorded(root)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	changed := false
	for _, p := range paths {
		w, inCode := want[p]
		g, inFile := got[p]
		switch {
		case !inFile:
			t.Errorf("%s: a public package the files do not record", p)
		case !inCode:
			t.Errorf("%s: recorded, but the package is gone or no longer public", p)
		case w != g:
			t.Errorf("%s: the code's surface differs from the record:\n%s", p, diff(g, w))
		default:
			continue
		}
		changed = true
	}
	if changed {
		t.Log("The public surface changed. If the change is meant, run `make api-surface` and commit api-surface/ with it.")
	}
}

// diff lists the lines only the record has (-) and only the code has (+).
func diff(recorded, code string) string {
	in := func(text string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
			if l != "" {
				m[l] = true
			}
		}
		return m
	}
	r, c := in(recorded), in(code)
	var out []string
	for l := range r {
		if !c[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range c {
		if !r[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][2:] < out[j][2:] })
	return strings.Join(out, "\n")
}

// TestSignatureLeavesNamesOut: renaming a parameter is no change to the
// surface, so the record must not hold the names.
func TestSignatureLeavesNamesOut(t *testing.T) {
	lines, err := Surface(root + "/migration")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range lines {
		if strings.HasPrefix(l, "func Run(") {
			found = true
			if strings.Contains(l, "ctx ") {
				t.Errorf("parameter names kept: %s", l)
			}
		}
	}
	if !found {
		t.Errorf("func Run not found in migration's surface: %v", lines)
	}
}
