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

package limit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"

	"github.com/graduator/graduator/test/figures"
)

// simFigures collects what the simulated server's specs measure, for the
// table of docs/benchmarks.md they write with LIMIT_RECORD=1: per engine
// write cost, and on the other server shapes. The clock is fake and the
// runs seeded, so the table does not depend on the machine.
var simFigures = struct {
	mu     sync.Mutex
	byCost map[string]map[string]string // row -> cost -> value
	rows   []string                     // the per-cost rows, in order
	shapes [][2]string                  // figure, value, in order
}{byCost: map[string]map[string]string{}}

// costs are the engine write costs of the per-cost table's columns.
var costs = []float64{1, 1.7, 3}

func costColumn(cost float64) string { return fmt.Sprintf("c = %g", cost) }

// recordCost records a figure of the runs where an engine write costs cost.
func recordCost(cost float64, row, format string, args ...any) {
	simFigures.mu.Lock()
	defer simFigures.mu.Unlock()
	if simFigures.byCost[row] == nil {
		simFigures.byCost[row] = map[string]string{}
		simFigures.rows = append(simFigures.rows, row)
	}
	simFigures.byCost[row][costColumn(cost)] = fmt.Sprintf(format, args...)
}

// recordShape records a figure of another server shape.
func recordShape(figure, format string, args ...any) {
	simFigures.mu.Lock()
	defer simFigures.mu.Unlock()
	simFigures.shapes = append(simFigures.shapes, [2]string{figure, fmt.Sprintf(format, args...)})
}

// simTable is the block's table, false while a cell is missing (a focused
// run measured part of it).
func simTable() (string, bool) {
	simFigures.mu.Lock()
	defer simFigures.mu.Unlock()
	if len(simFigures.rows) == 0 || len(simFigures.shapes) == 0 {
		return "", false
	}
	var b strings.Builder
	b.WriteString("| figure |")
	for _, c := range costs {
		b.WriteString(" " + costColumn(c) + " |")
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(costs)) + "\n")
	for _, row := range simFigures.rows {
		b.WriteString("| " + row + " |")
		for _, c := range costs {
			v, ok := simFigures.byCost[row][costColumn(c)]
			if !ok {
				return "", false
			}
			b.WriteString(" " + v + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| other server shapes | value |\n| --- | --- |\n")
	for _, s := range slices.Clone(simFigures.shapes) {
		fmt.Fprintf(&b, "| %s | %s |\n", s[0], s[1])
	}
	return b.String(), true
}

// recordCommand writes the table; make it the block's command.
const recordCommand = "LIMIT_RECORD=1 go test ./internal/limit -ginkgo.focus simulated"

var _ = ReportAfterSuite("the simulated server's table in docs/benchmarks.md (LIMIT_RECORD=1)", func(r Report) {
	if os.Getenv("LIMIT_RECORD") != "1" || !r.SuiteSucceeded {
		return
	}
	table, ok := simTable()
	if !ok {
		Fail("LIMIT_RECORD=1 but the simulated server's table is incomplete (a focus narrower than " + recordCommand + "): not written")
	}
	path := filepath.Join("..", "..", "docs", "benchmarks.md")
	stamp := figures.NewStamp(recordCommand)
	stamp.Machine = "a fake clock, seeded"
	if err := figures.Write(path, "LIMIT SIMULATED", stamp, table); err != nil {
		Fail(fmt.Sprintf("LIMIT_RECORD=1 asked for the table: %v", err))
	}
	fmt.Printf("the simulated server's table written to %s\n", path)
})
