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

// Package space is the etcd space budget: how many bytes a migration's
// writes may add to etcd between two compactions, so that etcd never
// reaches its quota. Its files each have one job: the rule that sets a
// budget from etcd's database and quota (rule.go) and the one that judges
// the file while a run writes (file.go); the ledger a run hands on to the
// run that follows it (ledger.go); the gate every write of a graduation
// passes (gate.go); how a budget is set up from what the API server tells
// (inputs.go); the one budget every writer to an etcd shares in a process
// (pool.go), and between processes through the ledger the cluster keeps
// (shared.go, how it is split; lease.go, where it is kept).
//
// The etcd space budget. Every rewrite stores a new revision of the object
// in etcd; the old one stays until the API server compacts past the
// rewrite's revision (every 5 minutes by default, to the revision it saw at
// its previous compaction), and only then can etcd reuse its pages. So the
// database grows by what the run writes between two compactions, and at
// etcd's quota every write of every client fails (NOSPACE). The engine
// therefore keeps the bytes it wrote that no compaction has freed yet under
// a budget: a chunk of its writes is freed once a compaction passed its
// last write (a LIST at that exact resourceVersion answers 410 Gone), and
// new writes reuse the pages it freed. The database then grows by about one
// budget during the whole run.
package space

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// DefaultQuota is etcd's own default space quota (its
	// --quota-backend-bytes when not set): 2 GiB. With the quota not told,
	// the budget assumes it, as software assumes its dependencies'
	// documented defaults: a cluster that lowered its quota must tell it.
	DefaultQuota int64 = 2 << 30
	// MinBudget is the budget when the database's size is unknown (no
	// access to the API server's /metrics) and the quota is not told: a run
	// that adds less to etcd (about 9,000 objects of 1 KB, 800 of 16 KB, at
	// WriteCost) never waits for a compaction. It is under 1% of etcd's
	// default quota.
	MinBudget int64 = 16 << 20
	// growthDivisor: a database already large against the assumed default
	// quota (its quota was raised, or it is near full) may grow by a
	// quarter of its size at the start.
	growthDivisor = 4
	// With a quota (told or assumed) the database may reach three quarters
	// of it (the last quarter is every other client's and fragmentation's);
	// with a told quota the budget is never below 1/64 of it: a database
	// already past three quarters still migrates, slowly.
	quotaCeilingNum, quotaCeilingDen = 3, 4
	quotaFloorDivisor                = 64
	// noSizeQuotaDivisor: with a told quota but no database size, 1/16 of
	// the quota.
	noSizeQuotaDivisor = 16
	// defaultObjectBytes is the size assumed before an object was sampled.
	defaultObjectBytes = 16 << 10
	// storageSizeMetric is the API server's STABLE gauge of the etcd
	// database's physically allocated size, one series per etcd cluster
	// (label storage_cluster_id).
	storageSizeMetric = "apiserver_storage_size_bytes"
)

// Etcd is what a run knows of etcd's space when it starts: the
// inputs of BudgetFor.
type Etcd struct {
	// DatabaseSize is the database's size from the API server's /metrics;
	// 0 when unknown.
	DatabaseSize int64
	// Quota is etcd's quota as told (migration.Options.EtcdQuota); 0 when not told.
	Quota int64
	// SizeUnreported is set when the API server's /metrics answered but
	// carries no storage size: its storage does not report one, as a
	// kine datastore (k3s's SQLite, before k3s enabled its size in 2025)
	// does not, and there is no etcd quota to guard.
	SizeUnreported bool
	// Previous is what the runs before this one in the same etcd left
	// (Ledger): a run resumed, the managedFields cleanup after its
	// migration, the next CRD of a fleet. Zero when none is known.
	Previous Ledger
}

// BudgetFor is the rule: the bytes a run may add to etcd between two
// compactions (-1: no budget), and the reason a person reads in the
// progress.
//
//   - Quota told, database size known: up to three quarters of the quota,
//     at least 1/64 of it.
//   - Quota not told, database size known: etcd's default quota
//     (DefaultQuota) is assumed, and the database may grow to three
//     quarters of it; a database already large against it (past 60% of
//     it: its quota was raised, or it is near full) may grow by a quarter
//     of its size. Never below 300 MiB.
//   - No database size (no access to /metrics): 1/16 of a told quota, or
//     MinBudget.
//   - /metrics answers without a storage size and the quota is not told:
//     no budget (nothing to guard; telling a quota brings one back).
//
// After other runs (Etcd.Previous), the database's size above is what
// is in use of it (Ledger.inUse): etcd reuses the pages their writes
// freed before it grows the file, so a run that follows another keeps the
// pace of the first. The writes of the runs before not compacted yet
// (Ledger.Outstanding) stay charged to the new run until they are.
func BudgetFor(s Etcd) (int64, string) {
	file := s.DatabaseSize
	s.DatabaseSize = s.Previous.inUse(file)
	budget, reason := budgetFor(s)
	if s.DatabaseSize < file {
		reason += fmt.Sprintf("; its file is %s: %s of it is pages the runs before this one freed (their writes, up to %s at once and the pages around them, were compacted), which etcd reuses",
			BytesText(file), BytesText(file-s.DatabaseSize), BytesText(s.Previous.Peak))
	}
	return budget, reason
}

func budgetFor(s Etcd) (int64, string) {
	switch {
	case s.DatabaseSize > 0 && s.Quota > 0:
		budget := max(ceiling(s.Quota)-s.DatabaseSize, s.Quota/quotaFloorDivisor)
		return budget, fmt.Sprintf("%s per compaction: etcd's database is %s of its %s quota; it may grow to 3/4 of the quota (at least 1/64 of it per compaction)",
			BytesText(budget), BytesText(s.DatabaseSize), BytesText(s.Quota))
	case s.DatabaseSize > 0:
		return assumedQuotaBudget(s.DatabaseSize)
	case s.Quota > 0:
		budget := s.Quota / noSizeQuotaDivisor
		return budget, fmt.Sprintf("%s per compaction: 1/16 of etcd's %s quota (the database's size is unknown)", BytesText(budget), BytesText(s.Quota))
	case s.SizeUnreported:
		return -1, "off: the API server reports no storage size (a datastore without etcd's quota, such as kine's SQLite on k3s); tell etcd's quota to budget the writes anyway"
	}
	return MinBudget, fmt.Sprintf("%s per compaction: a fixed budget (etcd's database size is unknown and its quota not told)", BytesText(MinBudget))
}

// assumedQuotaBudget is the budget with etcd's quota not told: that of
// etcd's default quota, or a quarter of a database already large against
// it, whichever is more.
func assumedQuotaBudget(dbSize int64) (int64, string) {
	fromDefault, quarter := ceiling(DefaultQuota)-dbSize, dbSize/growthDivisor
	if fromDefault >= quarter {
		return fromDefault, fmt.Sprintf("%s per compaction: etcd's database is %s; its quota is not told, so etcd's default %s is assumed and the database may grow to 3/4 of it (a cluster that lowered the quota must tell it)",
			BytesText(fromDefault), BytesText(dbSize), BytesText(DefaultQuota))
	}
	return quarter, fmt.Sprintf("%s per compaction: a quarter of etcd's database (%s at the start, large against etcd's default %s quota, assumed when the quota is not told); tell etcd's quota to sharpen it",
		BytesText(quarter), BytesText(dbSize), BytesText(DefaultQuota))
}

// ceiling is how large the database may grow under quota.
func ceiling(quota int64) int64 { return quota * quotaCeilingNum / quotaCeilingDen }

// WriteCost is what one rewrite of an object of the given size (its JSON,
// as etcd stores a custom resource) adds to etcd's database: the value, its
// key and revision, and bbolt's pages around them (measured on etcd 3.6:
// about 1.2 times the object for 16 KB objects).
func WriteCost(objectBytes int64) int64 {
	return objectBytes + objectBytes/4 + 512
}

// BytesText writes n as a person reads it: a quantity (16Mi, 2Gi), to a
// tenth of a MiB or a hundredth of a GiB when it is not a whole one
// (1.48Gi rather than 1553340Ki).
func BytesText(n int64) string {
	const mi, gi = 1 << 20, 1 << 30
	switch {
	case n >= gi && n%gi != 0:
		return strconv.FormatFloat(float64(n)/gi, 'f', 2, 64) + "Gi"
	case n >= mi && n%mi != 0:
		return strconv.FormatFloat(float64(n)/mi, 'f', 1, 64) + "Mi"
	}
	return resource.NewQuantity(n, resource.BinarySI).String()
}
