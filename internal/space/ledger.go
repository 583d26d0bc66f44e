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

// Ledger is what a run's writes did to etcd's space, kept for the run
// that follows it in the same etcd. etcd's file keeps the pages a
// compaction freed until a defragmentation, and the API server's gauge is
// the file's size: after a run grew the file, the file alone says nothing
// of the pages its writes freed again. The ledger does.
type Ledger struct {
	// InUse is the part of etcd's database the run's budget counted as in
	// use when it started: the file's size, or less when it followed runs
	// whose writes were compacted since.
	InUse int64 `json:"inUse,omitempty"`
	// Peak is the most bytes that the run's writes, and those of the runs
	// before it in a row, held at once before a compaction freed them, as
	// charged (WriteCost).
	Peak int64 `json:"peak,omitempty"`
	// Outstanding is the bytes of the run's writes not known to be
	// compacted when it last reported, and Revision the highest revision
	// its writes were given: a run that follows holds those bytes until
	// etcd compacted past Revision.
	Outstanding int64  `json:"outstanding,omitempty"`
	Revision    uint64 `json:"revision,omitempty"`
}

// inUse is the part of a database of size file that the rule counts as in
// use after the runs of prev: the file less what their writes grew it by
// (ownGrowth: pages freed again once compacted), never less than what the
// first of them counted, nor more than the file. The file's growth past
// that is others' data, and counts.
func (prev Ledger) inUse(file int64) int64 {
	if prev.InUse <= 0 || prev.Peak <= 0 || file <= 0 {
		return file
	}
	return min(file, max(prev.InUse, file-ownGrowth(prev.Peak)))
}

// ownGrowth is the most that writes which held peak bytes at once, as
// charged (WriteCost), grow etcd's file by: their peak and a quarter more.
// bbolt keeps a large value in consecutive pages, and the pages a
// compaction freed are not all reused by the next writes (they are
// scattered, or a read still holds them): a run of 16 KB objects that
// held 22.7 MiB grew a defragmented file by 3-4 MiB more (test/quota's
// fleet). Counted as others' data, that growth shrank the next run's
// budget by as much.
func ownGrowth(peak int64) int64 { return peak + peak/ownGrowthDivisor }

// ownGrowthDivisor: the writes' own growth past their peak is at most a
// quarter of it (ownGrowth), the slack the file's guard allows too
// (judgeFile).
const ownGrowthDivisor = 4

// Writer names one writer of a graduation's objects. Each charges every
// write it makes to the etcd space budget: the rule "the database may grow
// to 3/4 of the quota between compactions" holds for the graduation as a
// whole only if none writes around it.
type Writer string

const (
	// WriterPass is the main pass's rewrites (migration.Run).
	WriterPass Writer = "pass"
	// WriterSweep is the catch-up sweep's rewrites (migration.Run).
	WriterSweep Writer = "sweep"
	// WriterCleanup is the managedFields cleanup's patches
	// (migration.CleanupManagedFields).
	WriterCleanup Writer = "managedFields cleanup"
)

// Writers are every writer of a graduation's objects. The graduation's
// other writes are of one object each (the CRD, the policy's status) and
// are not budgeted.
var Writers = []Writer{WriterPass, WriterSweep, WriterCleanup}

// Charge is what one writer charged to the budget: its writes and their
// bytes (WriteCost).
type Charge struct {
	Writes, Bytes int64
}
