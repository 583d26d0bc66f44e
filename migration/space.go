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
// therefore keeps the bytes it wrote that no compaction has freed yet under
// a budget: a chunk of its writes is freed once a compaction passed its
// last write (a LIST at that exact resourceVersion answers 410 Gone), and
// new writes reuse the pages it freed. The database then grows by about one
// budget during the whole run.

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

// spaceBudget is a run's budget in flight: the bytes its writes added to
// etcd that no compaction has freed yet, in chunks of about a quarter of
// the budget, oldest first. A chunk is freed once etcd compacted past the
// last revision its writes were given; so the run goes on writing while
// the oldest chunks wait for their compaction, and stops only when the
// bytes not compacted yet would pass the budget.
type spaceBudget struct {
	budget int64 // < 0: off
	// compacted tells whether etcd compacted past a revision: a read at
	// exactly that resourceVersion answers 410 Gone once it did.
	compacted func(ctx context.Context, resourceVersion string) (bool, error)

	mu          sync.Mutex
	chunks      []*spaceChunk // oldest first; the last one is open
	outstanding int64         // the bytes of every chunk
	sampleBytes int64
	samples     int64
	lastProbe   time.Time
}

// spaceChunk is writes whose bytes are freed together.
type spaceChunk struct {
	bytes    int64
	pending  int    // writes not answered yet
	revision uint64 // the highest revision its writes were given
}

// chunkDivisor: a chunk holds about a quarter of the budget.
const chunkDivisor = 4

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

// tryReserve charges one write to the open chunk when the budget allows it
// (a write always goes when nothing is outstanding) and returns the chunk
// to tell when it is answered, or false.
func (s *spaceBudget) tryReserve() (*spaceChunk, bool) {
	if s.off() {
		return nil, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cost()
	if s.outstanding > 0 && s.outstanding+c > s.budget {
		return nil, false
	}
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].bytes >= s.budget/chunkDivisor {
		s.chunks = append(s.chunks, &spaceChunk{})
	}
	chunk := s.chunks[len(s.chunks)-1]
	chunk.bytes += c
	chunk.pending++
	s.outstanding += c
	return chunk, true
}

// done ends a reserved write; rv is the resourceVersion it was given, empty
// when it stored nothing.
func (s *spaceBudget) done(chunk *spaceChunk, rv string) {
	if s.off() || chunk == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	chunk.pending--
	if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
		chunk.revision = max(chunk.revision, v)
	}
}

// oldest returns the revision the oldest chunk waits for, once every write
// of it was answered (ready); a chunk that stored nothing is dropped.
func (s *spaceBudget) oldest() (rev uint64, ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.chunks) > 0 {
		head := s.chunks[0]
		if head.pending > 0 {
			return 0, false
		}
		if head.revision == 0 { // nothing stored: nothing to free
			s.pop()
			continue
		}
		return head.revision, true
	}
	return 0, false
}

// pop frees the oldest chunk: etcd compacted past it. Callers hold mu.
func (s *spaceBudget) pop() {
	s.outstanding -= s.chunks[0].bytes
	s.chunks = s.chunks[1:]
}

// release frees the oldest chunks etcd compacted since, asking at most once
// per compactionPoll unless force. It returns the revision it asked about
// last that was not compacted yet (0 when none).
func (s *spaceBudget) release(ctx context.Context, force bool) string {
	if s.off() {
		return ""
	}
	s.mu.Lock()
	due := force || time.Since(s.lastProbe) >= compactionPoll
	if due {
		s.lastProbe = time.Now()
	}
	s.mu.Unlock()
	if !due {
		return ""
	}
	for {
		rev, ready := s.oldest()
		if !ready {
			return ""
		}
		text := strconv.FormatUint(rev, 10)
		if compacted, err := s.compacted(ctx, text); err != nil || !compacted {
			return text
		}
		s.mu.Lock()
		if len(s.chunks) > 0 && s.chunks[0].revision == rev && s.chunks[0].pending == 0 {
			s.pop()
		}
		s.mu.Unlock()
	}
}

// reserveSpace lets one more write go once the budget allows it, waiting
// for compactions while the bytes not compacted yet would pass it. It
// returns the chunk the write is charged to. Only the dispatcher calls it.
func (r *runner) reserveSpace(ctx context.Context) (*spaceChunk, error) {
	if r.space.off() {
		return nil, nil
	}
	r.space.release(ctx, false)
	if chunk, ok := r.space.tryReserve(); ok {
		return chunk, nil
	}
	waiting := false
	defer func() {
		if waiting {
			r.mu.Lock()
			r.progress.CompactionWait = ""
			r.mu.Unlock()
			r.notify()
			r.writers.restartWindow()
		}
	}()
	for {
		rev := r.space.release(ctx, true)
		if chunk, ok := r.space.tryReserve(); ok {
			if waiting {
				// etcd deletes what it compacted in the background.
				if err := sleep(ctx, compactionSettle); err != nil {
					r.space.done(chunk, "")
					return nil, err
				}
			}
			return chunk, nil
		}
		if !waiting && rev != "" {
			waiting = true
			r.startWait(ctx, rev)
		}
		if err := sleep(ctx, compactionPoll); err != nil {
			return nil, err
		}
	}
}

// startWait shows in the progress that the run waits for a compaction.
func (r *runner) startWait(ctx context.Context, rev string) {
	r.mu.Lock()
	r.progress.CompactionWaits++
	r.progress.CompactionWait = fmt.Sprintf("waiting for etcd's next compaction past resourceVersion %s since %s: the run's writes not compacted yet reached its budget of %s",
		rev, time.Now().UTC().Format(time.RFC3339), bytesText(r.space.budget))
	r.mu.Unlock()
	klog.FromContext(ctx).Info("waiting for etcd to compact", "resource", r.opts.Resource.String(), "resourceVersion", rev, "budget", bytesText(r.space.budget))
	r.notify()
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

// maxReasonError bounds the error quoted in SpaceBudgetReason, which a
// policy's status carries (512 characters at most).
const maxReasonError = 200

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
		text := err.Error()
		if len(text) > maxReasonError {
			text = text[:maxReasonError] + "..."
		}
		r.progress.SpaceBudgetReason += "; etcd's database size is unknown: " + text
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
