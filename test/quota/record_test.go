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

package quota

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"

	"github.com/graduator/graduator/internal/space"
	"github.com/graduator/graduator/test/figures"
)

// quotaRun is one migration of the suite: a row of its table in
// docs/benchmarks.md, which `make test-quota RECORD=1` writes.
type quotaRun struct {
	spec           string
	objects, bytes int
	// budget is the run's space budget (-1: off); before and peak etcd's
	// database at its start and its most during it.
	budget, before, peak int64
	took                 time.Duration
	waits                int
	err                  error
}

// quotaRuns are the suite's runs, in order (its specs run in order, one at
// a time).
var quotaRuns []quotaRun

func (r quotaRun) row() string {
	budget := "off"
	if r.budget >= 0 {
		budget = space.BytesText(r.budget)
	}
	result := "complete"
	if r.err != nil {
		result = r.err.Error()
		if len(result) > 80 {
			result = result[:80] + "..."
		}
	}
	return fmt.Sprintf("| %s | %d objects of %d B | %s | %s (%.0f%%) | %s (%.0f%%) | %s, %d compaction waits | %s |",
		r.spec, r.objects, r.bytes, budget, space.BytesText(r.before), 100*float64(r.before)/quota,
		space.BytesText(r.peak), 100*float64(r.peak)/quota, r.took.Round(100*time.Millisecond), r.waits,
		strings.ReplaceAll(result, "|", "/"))
}

var _ = ReportAfterSuite("the quota suite's table in docs/benchmarks.md (QUOTA_RECORD=1)", func(r Report) {
	if os.Getenv("QUOTA_RECORD") != "1" || !r.SuiteSucceeded || len(quotaRuns) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "etcd at a %s quota compacting every %s, the suite in %s.\n\n", space.BytesText(quota), compactionInterval,
		r.RunTime.Round(time.Second))
	b.WriteString("| spec | population | budget | database at start | peak of the quota | run | result |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, run := range quotaRuns {
		b.WriteString(run.row() + "\n")
	}
	stamp := figures.NewStamp("make test-quota RECORD=1")
	stamp.Date = r.StartTime.UTC()
	path := filepath.Join("..", "..", "docs", "benchmarks.md")
	if err := figures.Write(path, "QUOTA SUITE", stamp, b.String()); err != nil {
		Fail(fmt.Sprintf("QUOTA_RECORD=1 asked for the table: %v", err))
	}
	fmt.Printf("the quota suite's table written to %s\n", path)
})
