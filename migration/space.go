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

package migration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// The etcd space budget. Every rewrite stores a new revision of the object
// in etcd; the old one stays until the API server compacts past the
// rewrite's revision (every 5 minutes by default, to the revision it saw at
// its previous compaction), and only then can etcd reuse its pages. So the
// database grows by what the run writes between two compactions, and at
// etcd's quota every write of every client fails (NOSPACE). The engine
// therefore writes at most a budget of bytes, then waits until a compaction
// passed its last write (a LIST at that exact resourceVersion answers 410
// Gone), and goes on with a fresh budget that reuses the freed pages. The
// database then grows by about one budget during the whole run.

const (
	// MinSpaceBudget is the smallest budget: a run that adds less to etcd
	// (about 16,000 objects of 1 KB, 1,000 of 16 KB) never waits for a
	// compaction. It is under 1% of etcd's default 2 GiB quota. It is also
	// the budget when neither the database's size nor the quota is known.
	MinSpaceBudget int64 = 16 << 20
	// growthDivisor: with the quota unknown, the run may grow the database
	// by a quarter of its size at the start.
	growthDivisor = 4
	// With a known quota the database may reach three quarters of it (the
	// last quarter is every other client's and fragmentation's), and the
	// budget is never below 1/64 of it: a database already past three
	// quarters still migrates, slowly.
	quotaCeilingNum, quotaCeilingDen = 3, 4
	quotaFloorDivisor                = 64
	// noSizeQuotaDivisor: with a known quota but no database size, 1/16 of
	// the quota.
	noSizeQuotaDivisor = 16
	// defaultObjectBytes is the size assumed before an object was sampled.
	defaultObjectBytes = 16 << 10
	// storageSizeMetric is the API server's STABLE gauge of the etcd
	// database's physically allocated size, one series per etcd cluster
	// (label storage_cluster_id).
	storageSizeMetric = "apiserver_storage_size_bytes"
)

// compactionPoll is how often a run that waits asks whether the compaction
// came; compactionSettle lets etcd delete the compacted revisions (it does
// so in the background) before writes go on. Variables for the tests.
var compactionPoll, compactionSettle = 2 * time.Second, 2 * time.Second

// SpaceBudgetFor is the rule: the bytes a run may add to etcd between two
// compactions, given the database's size at the start (0: unknown) and
// etcd's quota (0: unknown), and the reason a person reads in the progress.
//
//   - Quota unknown: a quarter of the database's size, at least
//     MinSpaceBudget. A cluster's quota leaves room above the data it
//     holds (etcd's default 2 GiB against the few hundred MB most clusters
//     store): growing by a bounded fraction of what is there keeps within
//     that room, where growing by the migrated population (up to the whole
//     database) does not.
//   - Quota known: up to three quarters of the quota, at least 1/64 of it.
//   - Size unknown (no access to /metrics): MinSpaceBudget, or 1/16 of a
//     known quota.
func SpaceBudgetFor(dbSize, quota int64) (int64, string) {
	switch {
	case dbSize > 0 && quota > 0:
		budget := max(quota*quotaCeilingNum/quotaCeilingDen-dbSize, quota/quotaFloorDivisor)
		return budget, fmt.Sprintf("%s per compaction: etcd's database is %s of its %s quota; it may grow to 3/4 of the quota (at least 1/64 of it per compaction)",
			bytesText(budget), bytesText(dbSize), bytesText(quota))
	case dbSize > 0:
		budget := max(dbSize/growthDivisor, MinSpaceBudget)
		return budget, fmt.Sprintf("%s per compaction: a quarter of etcd's database (%s at the start, at least %s); give etcd's quota to sharpen it",
			bytesText(budget), bytesText(dbSize), bytesText(MinSpaceBudget))
	case quota > 0:
		budget := quota / noSizeQuotaDivisor
		return budget, fmt.Sprintf("%s per compaction: 1/16 of etcd's %s quota (the database's size is unknown)", bytesText(budget), bytesText(quota))
	}
	return MinSpaceBudget, fmt.Sprintf("%s per compaction: a fixed budget (etcd's database size and quota are unknown)", bytesText(MinSpaceBudget))
}

// WriteCost is what one rewrite of an object of the given size (its JSON,
// as etcd stores a custom resource) adds to etcd's database: the value, its
// key and revision, and bbolt's pages around them (measured on etcd 3.6:
// about 1.2 times the object for 16 KB objects).
func WriteCost(objectBytes int64) int64 {
	return objectBytes + objectBytes/4 + 512
}

// parseStorageSize finds the API server's storage size gauge in its
// /metrics text; with several etcd clusters (events apart, say) it takes the
// largest, which holds the custom resources or is the one to worry about.
func parseStorageSize(metrics []byte) (int64, bool) {
	var size float64
	found := false
	scanner := bufio.NewScanner(bytes.NewReader(metrics))
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		rest, ok := strings.CutPrefix(line, storageSizeMetric)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil && v >= size {
			size, found = v, true
		}
	}
	return int64(size), found && size > 0
}

func bytesText(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// spaceBudget is a run's budget in flight: the bytes reserved since the
// last compaction the run waited for, the writes not answered yet and the
// highest revision its writes were given.
type spaceBudget struct {
	budget int64 // < 0: off
	// waitFor tells whether etcd compacted past a revision: a read at
	// exactly that resourceVersion answers 410 Gone once it did.
	compacted func(ctx context.Context, resourceVersion string) (bool, error)

	mu          sync.Mutex
	spent       int64
	pending     int
	revision    uint64
	sampleBytes int64
	samples     int64
}

func (s *spaceBudget) off() bool { return s == nil || s.budget < 0 }

// cost is what the next write is charged.
func (s *spaceBudget) cost() int64 {
	if s.samples == 0 {
		return WriteCost(defaultObjectBytes)
	}
	return WriteCost(s.sampleBytes / s.samples)
}

// sampled adds the size of one object to the mean the cost is taken from.
func (s *spaceBudget) sampled(objectBytes int64) {
	if s.off() || objectBytes <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sampleBytes += objectBytes
	s.samples++
}

// tryReserve charges one write when the budget allows it (the first write
// after a compaction always goes) and reports whether it did.
func (s *spaceBudget) tryReserve() bool {
	if s.off() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cost()
	if s.spent > 0 && s.spent+c > s.budget {
		return false
	}
	s.spent += c
	s.pending++
	return true
}

// done ends a reserved write; rv is the resourceVersion it was given, empty
// when it stored nothing.
func (s *spaceBudget) done(rv string) {
	if s.off() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
		s.revision = max(s.revision, v)
	}
}

// drained returns the revision to wait for once every reserved write was
// answered, or false while some are in flight.
func (s *spaceBudget) drained() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revision, s.pending == 0
}

// renew starts a fresh budget after a compaction.
func (s *spaceBudget) renew() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spent = 0
}

// reserveSpace lets one more write go once the budget allows it, waiting
// for a compaction when it is spent. Only the dispatcher calls it.
func (r *runner) reserveSpace(ctx context.Context) error {
	if r.space.tryReserve() {
		return nil
	}
	// Every reserved write must be answered first: the wait is for a
	// compaction past the last of them.
	var rev uint64
	for {
		var ok bool
		if rev, ok = r.space.drained(); ok {
			break
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	if rev > 0 {
		if err := r.waitCompaction(ctx, strconv.FormatUint(rev, 10)); err != nil {
			return err
		}
	}
	r.space.renew()
	r.writers.restartWindow()
	if !r.space.tryReserve() {
		return fmt.Errorf("the etcd space budget refuses a write after a compaction")
	}
	return nil
}

// waitCompaction waits until etcd compacted past rev, showing why in the
// progress meanwhile.
func (r *runner) waitCompaction(ctx context.Context, rev string) error {
	r.mu.Lock()
	r.progress.CompactionWaits++
	r.progress.CompactionWait = fmt.Sprintf("waiting for etcd's next compaction past resourceVersion %s since %s: this run wrote its budget of %s since the last one",
		rev, time.Now().UTC().Format(time.RFC3339), bytesText(r.space.budget))
	r.mu.Unlock()
	klog.FromContext(ctx).Info("waiting for etcd to compact", "resource", r.opts.Resource.String(), "resourceVersion", rev, "budget", bytesText(r.space.budget))
	r.notify()
	for {
		compacted, err := r.space.compacted(ctx, rev)
		if err == nil && compacted {
			break
		}
		if err := sleep(ctx, compactionPoll); err != nil {
			return err
		}
	}
	if err := sleep(ctx, compactionSettle); err != nil {
		return err
	}
	r.mu.Lock()
	r.progress.CompactionWait = ""
	r.mu.Unlock()
	r.notify()
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newSpaceBudget sets the run's budget from Options.SpaceBudget, else from
// the rule, reading the database's size from the API server's /metrics.
func (r *runner) newSpaceBudget(ctx context.Context) {
	s := &spaceBudget{budget: r.opts.SpaceBudget, compacted: r.objects.compacted}
	r.space = s
	switch {
	case s.budget < 0:
		r.progress.SpaceBudget, r.progress.SpaceBudgetReason = -1, "off"
		return
	case s.budget > 0:
		r.progress.SpaceBudget, r.progress.SpaceBudgetReason = s.budget, fmt.Sprintf("%s per compaction, as set", bytesText(s.budget))
		return
	}
	size, err := r.storageSize(ctx)
	s.budget, r.progress.SpaceBudgetReason = SpaceBudgetFor(size, r.opts.EtcdQuota)
	r.progress.SpaceBudget, r.progress.DatabaseSize = s.budget, size
	if err != nil {
		r.progress.SpaceBudgetReason += fmt.Sprintf("; etcd's database size is unknown: %v", err)
		klog.FromContext(ctx).Info("the etcd space budget cannot read the database's size; a conservative budget applies",
			"resource", r.opts.Resource.String(), "budget", bytesText(s.budget), "err", err.Error())
	}
}

// storageSize reads the etcd database's size from the API server.
func (r *runner) storageSize(ctx context.Context) (int64, error) {
	if r.metrics == nil {
		return 0, fmt.Errorf("no rest.Config (Options.Config) to read the API server's /metrics with")
	}
	data, err := r.metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the API server's /metrics (the chart grants get on it): %w", err)
	}
	size, ok := parseStorageSize(data)
	if !ok {
		return 0, fmt.Errorf("the API server's /metrics has no %s", storageSizeMetric)
	}
	return size, nil
}
