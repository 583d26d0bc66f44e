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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/graduator/graduator/test/figures"
)

// measured are the forms of a measured ratio or rate, which belong in a
// generated table (test/figures) and nowhere else:
//   - a multiple with decimals: "1.25x", "2.5x";
//   - a fraction of something: "0.66 of", "0.92 of the ceiling";
//   - a range of fractions: "0.18-0.26" (not of seconds or bytes: "0.2-1.5 s");
//   - a rate: "701 objects/s", "1,000 writes/s", "327/s";
//   - a range of shares: "65-83%".
var measured = regexp.MustCompile(`\b\d+\.\d+x\b` +
	`|\b\d\.\d+ of\b` +
	`|\b\d\.\d+-\d\.\d+\b` +
	`|\b\d[\d,]*(\.\d+)? ?(objects|writes|reviews|requests)?/s\b` +
	`|\b\d+(\.\d+)?-\d+(\.\d+)?%`)

// aUnit after a range makes it a range of durations or sizes, not of ratios.
var aUnit = regexp.MustCompile(`^ ?(ms|µs|s|min|h|[KMG]i?B|B)([^\pL/]|$)`)

// asTarget are the words that make the figure after them a target or a
// bound, not a measurement: ">= 0.80", "at least 0.9 of", "within 1.5x",
// "target 0.3", "paced at 100 writes/s".
var asTarget = regexp.MustCompile(`(>=|<=|≥|≤|<|>|\bat least|\bat most|\babove|\bbelow|\bunder|\bwithin|\btargets?( of| is)?|\bpaced at)[\s*` + "`" + `]*$`)

// handWritten lists, as "file:line: figure", each measured figure written
// outside a generated block and a fenced code block (commands and sample
// output) of doc, but for those written as targets.
func handWritten(name, doc string) ([]string, error) {
	blocks, err := figures.Blocks(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var found []string
	offset, fenced := 0, false
	for i, line := range strings.SplitAfter(doc, "\n") {
		start := offset
		offset += len(line)
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || inBlock(blocks, start) {
			continue
		}
		for _, m := range measured.FindAllStringIndex(line, -1) {
			if asTarget.MatchString(strings.ToLower(line[:m[0]])) || aUnit.MatchString(line[m[1]:]) {
				continue
			}
			found = append(found, fmt.Sprintf("%s:%d: %q", name, i+1, line[m[0]:m[1]]))
		}
	}
	return found, nil
}

func inBlock(blocks []figures.Block, at int) bool {
	for _, b := range blocks {
		if at >= b.Start && at < b.End {
			return true
		}
	}
	return false
}

// TestNoFigureByHand: a measured ratio or rate stands only in the table
// the command that measures it writes (docs/benchmarks.md,
// docs/reliability.md); every other page states the target in words and
// links to the table.
func TestNoFigureByHand(t *testing.T) {
	out, err := exec.Command("git", "-C", root(), "ls-files", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var found []string
	for name := range strings.FieldsSeq(string(out)) {
		doc, err := os.ReadFile(filepath.Join(root(), name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := handWritten(name, string(doc))
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, f...)
	}
	if len(found) > 0 {
		t.Errorf("%d measured figures written by hand outside their generated table: state the target in words "+
			"and link to the table (docs/benchmarks.md, docs/reliability.md), or write a target as one (\">= 0.80\"):\n%s",
			len(found), strings.Join(found, "\n"))
	}
}

// TestHandWritten: what the check takes for a figure, and what it leaves.
func TestHandWritten(t *testing.T) {
	doc := strings.Join([]string{
		"the engine took 0.66 of the ceiling",                     // 1: caught
		"it ran 1.11x the baseline at 701 objects/s",              // 2: two caught
		"beside 8 writers 0.18-0.26, the client keeping 65-83%",   // 3: two caught
		"target: a whole run >= 0.80 of the ceiling, within 1.5x", // 4: targets
		"a client paced at 100 writes/s keeps at least 0.9 of it", // 5: targets
		"```",
		"migrating [====]  48% 1450/3000  290/s", // 7: sample output
		"```",
		figures.Begin("BENCH X", "make bench"),
		"| engine | 0.70 of the ceiling | 620/s |", // 10: in its table
		figures.End("BENCH X"),
		"3 x 1.2 objects; 2 GiB; 55% of the quota; v1.37.2; 0.2-1.5 s; 1.45-1.52 µs", // 12: no ratio or rate
	}, "\n")
	found, err := handWritten("doc.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`doc.md:1: "0.66 of"`, `doc.md:2: "1.11x"`, `doc.md:2: "701 objects/s"`,
		`doc.md:3: "0.18-0.26"`, `doc.md:3: "65-83%"`}
	if strings.Join(found, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
}
