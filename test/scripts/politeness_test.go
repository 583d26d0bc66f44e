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

package scripts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/graduator/graduator/migration"
)

// promiseProse are the texts that state PriorityBackground's promise in
// numbers to readers who cannot follow a Go name: the CRD's field
// descriptions (kubectl explain), the CLI's help and the documents.
var promiseProse = []string{
	"api/v1alpha1/crdversionpolicy_types.go",
	"config/crd/bases/graduator.io_crdversionpolicies.yaml",
	"charts/graduator/crds/graduator.io_crdversionpolicies.yaml",
	"internal/cli/migrate.go",
	"docs/limits.md", "docs/design.md", "docs/policy.md",
}

// promiseForms are the ways those texts state each number of the promise,
// with the constant that defines it.
var promiseForms = []struct {
	form  *regexp.Regexp
	value float64
	scale float64
}{
	// "they keep 55% or more of", "at 55% of their rate" (not the share
	// under which the latency judges: "would keep 90% or more of")
	{regexp.MustCompile(`\b(?:at|they keep|keeps) (\d+)% or more of\b|\bat (\d+)% of their rate\b`), migration.BackgroundKept, 100},
	// "less than 57% of their rate", "under 57% of their rate"
	{regexp.MustCompile(`\b(?:less than|under) (\d+)% of their rate\b`), migration.BackgroundYieldBelow, 100},
	// "within 1.7 times", "over 1.7 times", "within 1.7x of one write" (not where the
	// limit comes down to: "would be 1.4 times")
	{regexp.MustCompile(`\b(?:within|over|above|more than) (\d+\.\d+)(?: times\b|x of one write)`), migration.BackgroundLatencyMax, 1},
}

// TestPolitenessPromiseStated: each statement of the promise in prose says
// what the constants define (migration.BackgroundKept,
// BackgroundYieldBelow, BackgroundLatencyMax), so changing one is changing
// every text that tells it.
func TestPolitenessPromiseStated(t *testing.T) {
	stated := 0
	for _, name := range promiseProse {
		raw, err := os.ReadFile(filepath.Join(root(), name))
		if err != nil {
			t.Fatal(err)
		}
		// One line of words: comment markers and line breaks gone.
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(raw), "//", " ")), " ")
		for _, f := range promiseForms {
			for _, m := range f.form.FindAllStringSubmatch(text, -1) {
				figure := strings.Join(m[1:], "")
				got, err := strconv.ParseFloat(figure, 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", name, m[0], err)
				}
				stated++
				if want := strconv.FormatFloat(f.value*f.scale, 'f', 2, 64); strconv.FormatFloat(got, 'f', 2, 64) != want {
					t.Errorf("%s: %q states %s; the promise's constant says %s", name, m[0], figure, strings.TrimRight(strings.TrimRight(want, "0"), "."))
				}
			}
		}
	}
	if stated == 0 {
		t.Error("no statement of the promise found: the forms no longer match the texts")
	}
}
