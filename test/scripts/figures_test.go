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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/graduator/graduator/test/figures"
)

// measured are the forms of a measured ratio or rate, which belong in a
// generated table (test/figures) and nowhere else:
//   - a multiple with decimals: "1.25x", "2.5x";
//   - a fraction of something: "0.66 of", "0.92 of the ceiling";
//   - a range of fractions: "0.18-0.26" (not of seconds or bytes: "0.2-1.5 s");
//   - a rate: "701 objects/s", "1,000 writes/s", "327/s";
//   - a range of shares: "65-83%";
//   - a time a benchmark reads: "12 µs", "340 ns", "4.5 ms" (a whole
//     number of milliseconds is a setting: "every 300 ms");
//   - a plain ratio: a fraction, "0.82" (not a setting, "CPU=0.60"); a
//     table's cell, "| 3.36 |" (not a version, "| 1.37.2 |"); "ratio 3.38".
var measured = regexp.MustCompile(`\b\d+\.\d+ ?x\b` +
	`|\b\d\.\d+ of\b` +
	`|\b\d\.\d+-\d\.\d+\b` +
	`|\b\d[\d,]*(\.\d+)? ?(objects|writes|reviews|requests)?/s\b` +
	`|\b\d+(\.\d+)?-\d+(\.\d+)?%` +
	`|\b\d+(\.\d+)? ?(µs|ns)\b` +
	`|\b\d+\.\d+ ?ms\b` +
	`|\|\s*\d+\.\d\d\b` +
	`|\bratio:? \d+\.\d+` +
	`|\b0\.\d\d\b`)

// notARatio after a figure makes it a version ("1.37.2") or a bound on N
// ("1.2 x N writes"); before one, a setting ("CPU=0.60") or a version.
var (
	notARatio   = regexp.MustCompile(`^(\.\d| N\b)`)
	notARatioOn = regexp.MustCompile(`[\pL\d.=/-]$`)
)

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
			figure := strings.TrimLeft(line[m[0]:m[1]], "| \t")
			before := line[:m[1]-len(figure)]
			if asTarget.MatchString(strings.ToLower(before)) || aUnit.MatchString(line[m[1]:]) ||
				notARatio.MatchString(line[m[1]:]) || notARatioOn.MatchString(before) {
				continue
			}
			found = append(found, fmt.Sprintf("%s:%d: %q", name, i+1, figure))
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
		"a scan took 12 µs, 340 ns and 4.5 ms; it kept 0.82",                         // 13: four caught
		"| sharing the 2 cores | 3.36 | 2.00; 0.09 (at 8,000: ratio 3.38) |",         // 14: four caught
		"every 300 ms, Kubernetes 1.30 to 1.37.2, CPU=0.60, at most 1.2 x N writes",  // 15: settings, versions, a bound
	}, "\n")
	found, err := handWritten("doc.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`doc.md:1: "0.66 of"`, `doc.md:2: "1.11x"`, `doc.md:2: "701 objects/s"`,
		`doc.md:3: "0.18-0.26"`, `doc.md:3: "65-83%"`,
		`doc.md:13: "12 µs"`, `doc.md:13: "340 ns"`, `doc.md:13: "4.5 ms"`, `doc.md:13: "0.82"`,
		`doc.md:14: "3.36"`, `doc.md:14: "2.00"`, `doc.md:14: "0.09"`, `doc.md:14: "ratio 3.38"`}
	if strings.Join(found, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
}

// tables is what a recorder writes after its lead line: markdown tables,
// a blank line between two.
const tables = `(\|[^\n]*\|\n)+(\n(\|[^\n]*\|\n)+)*$`

// recorders are the commands that write blocks, as a block's opening line
// names them: the command its stamp must name and the shape of what it
// writes under the stamp.
var recorders = []struct {
	opening, stamped, shape *regexp.Regexp
}{
	{ // test/bench: each section's report as it printed it
		regexp.MustCompile("^make bench(-scale| SECTIONS=[a-z]+)$"),
		regexp.MustCompile("^bin/bench "),
		regexp.MustCompile("^```\n[^`]*\n```\n$"),
	},
	{ // internal/limit/figures_test.go
		regexp.MustCompile(`^LIMIT_RECORD=1 go test ./internal/limit -ginkgo.focus simulated$`),
		regexp.MustCompile(`^LIMIT_RECORD=1 go test ./internal/limit -ginkgo.focus simulated$`),
		regexp.MustCompile(`^` + tables),
	},
	{ // test/quota/record_test.go
		regexp.MustCompile(`^make test-quota RECORD=1$`),
		regexp.MustCompile(`^make test-quota RECORD=1$`),
		regexp.MustCompile(`^etcd at a [^\n]+ quota compacting every [^\n]+, the suite in [^\n]+\.\n\n` + tables),
	},
	{ // test/robustness/run_test.go
		regexp.MustCompile(`^make test-robustness( RIG=quota)? RECORD=1$`),
		regexp.MustCompile(`^make test-robustness( [A-Z]+=\S+)* RECORD=1$`),
		regexp.MustCompile(`^\d+ seeds \([^\n]+\), size \S+ \(\d+ objects\), \d+ passed, [^\n]+\.\n\n` + tables),
	},
	{ // test/faults/harness_test.go
		regexp.MustCompile(`^make test-faults$`),
		regexp.MustCompile(`^make test-faults$`),
		regexp.MustCompile(`^Full run, suite (pass|FAIL) in [^\n]+\.\n\n` + tables),
	},
}

// checkBlock says what is wrong with block b of doc: a block holds nothing
// yet, or exactly what figures.Replace writes, a stamp Stamp.String can
// have written, naming the command that writes the block, over the shape
// that command prints.
func checkBlock(doc string, b figures.Block) error {
	body := b.Body(doc)
	if strings.TrimSpace(body) == "" {
		return nil
	}
	i := slices.IndexFunc(recorders, func(r struct{ opening, stamped, shape *regexp.Regexp }) bool {
		return r.opening.MatchString(b.Command)
	})
	if i < 0 {
		return fmt.Errorf("block %s: no recorder writes blocks of `%s`", b.Name, b.Command)
	}
	r := recorders[i]
	stampLine, table, ok := strings.Cut(strings.TrimPrefix(body, "\n\n"), "\n\n")
	if !ok || !strings.HasPrefix(body, "\n\n") || !strings.HasSuffix(table, "\n\n") {
		return fmt.Errorf("block %s: not what figures.Replace writes (a blank line, the stamp, a blank line, "+
			"the table, a blank line)", b.Name)
	}
	stamp, err := figures.ParseStamp(stampLine)
	if err != nil {
		return fmt.Errorf("block %s: %w", b.Name, err)
	}
	if !r.stamped.MatchString(stamp.Command) {
		return fmt.Errorf("block %s: its stamp names `%s`, which does not write it (`%s` does)", b.Name,
			stamp.Command, b.Command)
	}
	if !r.shape.MatchString(strings.TrimSuffix(table, "\n")) {
		return fmt.Errorf("block %s: not the shape `%s` prints (%s)", b.Name, b.Command, r.shape)
	}
	return nil
}

// TestEveryBlockGenerated: each block of the documents holds what its
// command wrote, or nothing yet.
func TestEveryBlockGenerated(t *testing.T) {
	for _, name := range []string{"docs/benchmarks.md", "docs/reliability.md"} {
		doc, err := os.ReadFile(filepath.Join(root(), name))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := figures.Blocks(string(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, b := range blocks {
			if err := checkBlock(string(doc), b); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestCheckBlock: what the check takes for a generated block, and what it
// refuses.
func TestCheckBlock(t *testing.T) {
	stamp := figures.Stamp{Commit: "abc1234", Date: time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC),
		Command: "bin/bench -sections small -docs docs/benchmarks.md", Machine: "2 CPUs (GOMAXPROCS 2)"}
	block := func(command, body string) string {
		return figures.Begin("BENCH SMALL", command) + body + figures.End("BENCH SMALL") + "\n"
	}
	written := func(command string, s figures.Stamp, table string) string {
		doc, err := figures.Replace(block(command, "\n\n"), "BENCH SMALL", s, table)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	other := stamp
	other.Command = "go test ./internal/limit"
	for _, c := range []struct {
		name, doc string
		ok        bool
	}{
		{"as the bench writes it", written("make bench SECTIONS=small", stamp, "```\n== small ==\nengine 1.01\n```"), true},
		{"nothing yet", block("make bench SECTIONS=small", "\n\n"), true},
		{"a limit table", written("LIMIT_RECORD=1 go test ./internal/limit -ginkgo.focus simulated",
			figures.Stamp{Commit: "abc1234", Date: stamp.Date, Machine: "a fake clock, seeded",
				Command: "LIMIT_RECORD=1 go test ./internal/limit -ginkgo.focus simulated"},
			"| figure | c = 1 |\n| --- | --- |\n| kept | 63% |\n\n| other | value |\n| --- | --- |\n| a | b |"), true},
		{"an old hand table", block("make bench SECTIONS=small", "\n\nMeasured at commit ff93906, 2026-11-27, by "+
			"`bin/bench -n 3000`, on 2 CPUs, nothing else running.\n\n| contender | round 1 |\n| --- | --- |\n"+
			"| engine | 99% |\n\n"), false},
		{"a table where the bench prints its report", written("make bench SECTIONS=small", stamp,
			"| contender | round 1 |\n| --- | --- |\n| engine | 99% |"), false},
		{"commentary under the report", written("make bench SECTIONS=small", stamp,
			"```\n== small ==\n```\n\nOver the three rounds the engine kept up."), false},
		{"a stamp naming another command", written("make bench SECTIONS=small", other, "```\nreport\n```"), false},
		{"a command no recorder is", written("make small", stamp, "```\nreport\n```"), false},
	} {
		blocks, err := figures.Blocks(c.doc)
		if err != nil || len(blocks) != 1 {
			t.Fatalf("%s: Blocks = %v, %v", c.name, blocks, err)
		}
		if err := checkBlock(c.doc, blocks[0]); (err == nil) != c.ok {
			t.Errorf("%s: checkBlock = %v, want ok %t", c.name, err, c.ok)
		}
	}
}
