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

package space

import (
	"fmt"
	"time"
)

// fileCheckEvery is how often a budget that counts freed pages, or probes
// for them, reads the file's size: the API server refreshes its gauge
// every 30 s by default (--etcd-db-metric-poll-interval), and a read of a
// gauge not refreshed since the last one would see a file that did not
// grow. A variable for the tests.
var fileCheckEvery = 30 * time.Second

// fileWatch is what a budget knows of etcd's file while the run writes.
type fileWatch struct {
	// allowed is the size the file may reach: the larger of the file at
	// the start and the part of it in use plus the budget then.
	allowed int64
	// lastFile is the file at the last read; used the most bytes the run
	// held outstanding since.
	lastFile, used int64
	// quota is etcd's quota as told (0: the default is assumed).
	quota int64
	// credited: the budget counts pages freed by the runs before as free
	// (Ledger); probing: the budget started under 1/16 of the quota
	// with the file past the ceiling, and grows while the file shows the
	// run's writes land in free pages.
	credited, probing bool
}

// watching tells whether the file is worth reading.
func (w fileWatch) watching() bool { return w.credited || w.probing }

// judgeFile is the budget after a read of the file, and why it changed
// ("" when it did not):
//
//   - The file grew past what it may reach (fileWatch.allowed), give or
//     take a quarter of the budget (pages too scattered for a large
//     object): the pages counted as free were not all free (others' data
//     took them). The budget goes back to the rule's for the file alone,
//     and stops counting or probing for free pages.
//   - Probing, the file did not grow at all while the run held at least
//     3/4 of its budget: those writes landed in free pages, so the budget
//     doubles, to at most 1/16 of the quota (by then past the ceiling,
//     the file may grow by that much before the next read shows it: it
//     stays under 5/6 of the quota).
func judgeFile(w fileWatch, budget, file int64) (fileWatch, int64, string) {
	used := w.used
	w.used = 0
	if allowed := w.allowed; file > allowed+budget/ownGrowthDivisor {
		next, reason := BudgetFor(Etcd{DatabaseSize: file, Quota: w.quota})
		next = min(next, budget)
		w.credited, w.probing, w.allowed, w.lastFile = false, false, file+next, file
		return w, next, fmt.Sprintf("%s (etcd's file grew to %s while the run wrote, past the %s that the pages counted as free allowed: they were not all free, so the budget is the file's again)",
			reason, BytesText(file), BytesText(allowed))
	}
	grew := file > w.lastFile
	w.lastFile = file
	quota := w.quota
	if quota <= 0 {
		quota = DefaultQuota
	}
	probeCap := quota / probeCapDivisor
	if !w.probing || grew || used < budget*3/4 || budget >= probeCap {
		return w, budget, ""
	}
	next := min(2*budget, probeCap)
	return w, next, fmt.Sprintf("%s per compaction: etcd's file is %s, past 3/4 of the %s quota, yet it did not grow while the run's writes not compacted held %s: they landed in pages freed before, so the budget doubles while the file stays, to at most 1/16 of the quota",
		BytesText(next), BytesText(file), BytesText(quota), BytesText(used))
}

// probeCapDivisor: a probing budget grows to 1/16 of the quota at most.
const probeCapDivisor = 16

// newFileWatch is what a budget of budget, set from a file of size file
// of which inUse is counted in use, watches: credited when it counted
// freed pages, probing when the file is past the ceiling and the budget
// under 1/16 of the quota (at its floor, or a credit of a few freed pages
// only): whatever the ledger counted, the file then shows whether the
// run's writes land in free pages.
func newFileWatch(file, inUse, budget, quota int64) fileWatch {
	q := quota
	if q <= 0 {
		q = DefaultQuota
	}
	return fileWatch{allowed: max(file, inUse+budget), lastFile: file, quota: quota,
		credited: inUse < file, probing: file >= ceiling(q) && budget < q/probeCapDivisor}
}
