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
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/graduator/graduator/test/figures"
)

// TestEverySectionHasItsBlock: each section's report has its markers in
// docs/benchmarks.md (the scale section two, its watch cache on and off),
// so `make bench` never measures a section it cannot write.
func TestEverySectionHasItsBlock(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := figures.Blocks(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range blocks {
		names = append(names, b.Name)
	}
	for _, cached := range []bool{true, false} {
		b := &bench{opts: options{watchCache: cached}}
		for _, s := range append(slices.Clone(allSections), optionalSections...) {
			if name := b.blockName(s); !slices.Contains(names, name) {
				t.Errorf("section %s (watch cache %t): no block %s in docs/benchmarks.md", s, cached, name)
			}
		}
	}
}
