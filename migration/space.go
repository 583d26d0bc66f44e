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
	// DefaultEtcdQuota is etcd's own default space quota (its
	// --quota-backend-bytes when not set): 2 GiB. With the quota not told,
	// the budget assumes it, as software assumes its dependencies'
	// documented defaults: a cluster that lowered its quota must tell it.
	DefaultEtcdQuota int64 = 2 << 30
	// MinSpaceBudget is the budget when the database's size is unknown (no
	// access to the API server's /metrics) and the quota is not told: a run
	// that adds less to etcd (about 9,000 objects of 1 KB, 800 of 16 KB, at
	// WriteCost) never waits for a compaction. It is under 1% of etcd's
	// default quota.
	MinSpaceBudget int64 = 16 << 20
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

// compactionPoll is how often a run that waits asks whether the compaction
// came; compactionSettle lets etcd delete the compacted revisions (it does
// so in the background) before writes go on. Variables for the tests.
var compactionPoll, compactionSettle = 2 * time.Second, 2 * time.Second

// EtcdSpace is what a run knows of etcd's space when it starts: the
// inputs of SpaceBudgetFor.
type EtcdSpace struct {
	// DatabaseSize is the database's size from the API server's /metrics;
	// 0 when unknown.
	DatabaseSize int64
	// Quota is etcd's quota as told (Options.EtcdQuota); 0 when not told.
	Quota int64
	// SizeUnreported is set when the API server's /metrics answered but
	// carries no storage size: its storage does not report one, as a
	// kine datastore (k3s's SQLite, before k3s enabled its size in 2025)
	// does not, and there is no etcd quota to guard.
	SizeUnreported bool
	// Previous is what the runs before this one in the same etcd left
	// (SpaceLedger): a run resumed, the managedFields cleanup after its
	// migration, the next CRD of a fleet. Zero when none is known.
	Previous SpaceLedger
}

// SpaceLedger is what a run's writes did to etcd's space, kept for the run
// that follows it in the same etcd. etcd's file keeps the pages a
// compaction freed until a defragmentation, and the API server's gauge is
// the file's size: after a run grew the file, the file alone says nothing
// of the pages its writes freed again. The ledger does.
type SpaceLedger struct {
	// InUse is the part of etcd's database the run's budget counted as in
	// use when it started: the file's size, or less when it followed runs
	// whose writes were compacted since.
	InUse int64
	// Peak is the most bytes that the run's writes, and those of the runs
	// before it in a row, held at once before a compaction freed them, as
	// charged (WriteCost).
	Peak int64
	// Outstanding is the bytes of the run's writes not known to be
	// compacted when it last reported, and Revision the highest revision
	// its writes were given: a run that follows holds those bytes until
	// etcd compacted past Revision.
	Outstanding int64
	Revision    uint64
}

// inUse is the part of a database of size file that the rule counts as in
// use after the runs of prev: the file less what their writes grew it by
// (ownGrowth: pages freed again once compacted), never less than what the
// first of them counted, nor more than the file. The file's growth past
// that is others' data, and counts.
func (prev SpaceLedger) inUse(file int64) int64 {
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

// SpaceBudgetFor is the rule: the bytes a run may add to etcd between two
// compactions (-1: no budget), and the reason a person reads in the
// progress.
//
//   - Quota told, database size known: up to three quarters of the quota,
//     at least 1/64 of it.
//   - Quota not told, database size known: etcd's default quota
//     (DefaultEtcdQuota) is assumed, and the database may grow to three
//     quarters of it; a database already large against it (past 60% of
//     it: its quota was raised, or it is near full) may grow by a quarter
//     of its size. Never below 300 MiB.
//   - No database size (no access to /metrics): 1/16 of a told quota, or
//     MinSpaceBudget.
//   - /metrics answers without a storage size and the quota is not told:
//     no budget (nothing to guard; telling a quota brings one back).
//
// After other runs (EtcdSpace.Previous), the database's size above is what
// is in use of it (SpaceLedger.inUse): etcd reuses the pages their writes
// freed before it grows the file, so a run that follows another keeps the
// pace of the first. The writes of the runs before not compacted yet
// (SpaceLedger.Outstanding) stay charged to the new run until they are.
func SpaceBudgetFor(s EtcdSpace) (int64, string) {
	file := s.DatabaseSize
	s.DatabaseSize = s.Previous.inUse(file)
	budget, reason := spaceBudgetFor(s)
	if s.DatabaseSize < file {
		reason += fmt.Sprintf("; its file is %s: %s of it is pages the runs before this one freed (their writes, up to %s at once and the pages around them, were compacted), which etcd reuses",
			bytesText(file), bytesText(file-s.DatabaseSize), bytesText(s.Previous.Peak))
	}
	return budget, reason
}

func spaceBudgetFor(s EtcdSpace) (int64, string) {
	switch {
	case s.DatabaseSize > 0 && s.Quota > 0:
		budget := max(ceiling(s.Quota)-s.DatabaseSize, s.Quota/quotaFloorDivisor)
		return budget, fmt.Sprintf("%s per compaction: etcd's database is %s of its %s quota; it may grow to 3/4 of the quota (at least 1/64 of it per compaction)",
			bytesText(budget), bytesText(s.DatabaseSize), bytesText(s.Quota))
	case s.DatabaseSize > 0:
		return assumedQuotaBudget(s.DatabaseSize)
	case s.Quota > 0:
		budget := s.Quota / noSizeQuotaDivisor
		return budget, fmt.Sprintf("%s per compaction: 1/16 of etcd's %s quota (the database's size is unknown)", bytesText(budget), bytesText(s.Quota))
	case s.SizeUnreported:
		return -1, "off: the API server reports no storage size (a datastore without etcd's quota, such as kine's SQLite on k3s); tell etcd's quota to budget the writes anyway"
	}
	return MinSpaceBudget, fmt.Sprintf("%s per compaction: a fixed budget (etcd's database size is unknown and its quota not told)", bytesText(MinSpaceBudget))
}

// assumedQuotaBudget is the budget with etcd's quota not told: that of
// etcd's default quota, or a quarter of a database already large against
// it, whichever is more.
func assumedQuotaBudget(dbSize int64) (int64, string) {
	fromDefault, quarter := ceiling(DefaultEtcdQuota)-dbSize, dbSize/growthDivisor
	if fromDefault >= quarter {
		return fromDefault, fmt.Sprintf("%s per compaction: etcd's database is %s; its quota is not told, so etcd's default %s is assumed and the database may grow to 3/4 of it (a cluster that lowered the quota must tell it)",
			bytesText(fromDefault), bytesText(dbSize), bytesText(DefaultEtcdQuota))
	}
	return quarter, fmt.Sprintf("%s per compaction: a quarter of etcd's database (%s at the start, large against etcd's default %s quota, assumed when the quota is not told); tell etcd's quota to sharpen it",
		bytesText(quarter), bytesText(dbSize), bytesText(DefaultEtcdQuota))
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

// bytesText writes n as a person reads it: a quantity (16Mi, 2Gi), to a
// tenth of a MiB or a hundredth of a GiB when it is not a whole one
// (1.48Gi rather than 1553340Ki).
func bytesText(n int64) string {
	const mi, gi = 1 << 20, 1 << 30
	switch {
	case n >= gi && n%gi != 0:
		return strconv.FormatFloat(float64(n)/gi, 'f', 2, 64) + "Gi"
	case n >= mi && n%mi != 0:
		return strconv.FormatFloat(float64(n)/mi, 'f', 1, 64) + "Mi"
	}
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// Writer names one writer of a graduation's objects. Each charges every
// write it makes to the etcd space budget: the rule "the database may grow
// to 3/4 of the quota between compactions" holds for the graduation as a
// whole only if none writes around it.
type Writer string

const (
	// WriterPass is the main pass's rewrites (Run).
	WriterPass Writer = "pass"
	// WriterSweep is the catch-up sweep's rewrites (Run).
	WriterSweep Writer = "sweep"
	// WriterCleanup is the managedFields cleanup's patches
	// (CleanupManagedFields).
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
	// pageBytes is the largest object sampled in the page being
	// dispatched: its writes are charged at least that.
	pageBytes int64
	lastProbe time.Time
	// ledger is what the budget tells the run that follows: InUse from the
	// start, Peak as it goes (see SpaceLedger).
	ledger SpaceLedger
	// charged is what each writer charged.
	charged map[Writer]Charge

	// watch is what the budget knows of etcd's file while the run writes
	// (judgeFile); fileSize reads the file's size, at most every
	// fileCheckEvery, while the budget counts freed pages or probes for
	// them (nil: never). onRebudget tells the run a new budget's reason.
	watch         fileWatch
	fileSize      func(context.Context) (int64, error)
	lastFileCheck time.Time
	onRebudget    func(reason string)
}

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
	// (SpaceLedger); probing: the budget started under 1/16 of the quota
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
		next, reason := SpaceBudgetFor(EtcdSpace{DatabaseSize: file, Quota: w.quota})
		next = min(next, budget)
		w.credited, w.probing, w.allowed, w.lastFile = false, false, file+next, file
		return w, next, fmt.Sprintf("%s (etcd's file grew to %s while the run wrote, past the %s that the pages counted as free allowed: they were not all free, so the budget is the file's again)",
			reason, bytesText(file), bytesText(allowed))
	}
	grew := file > w.lastFile
	w.lastFile = file
	quota := w.quota
	if quota <= 0 {
		quota = DefaultEtcdQuota
	}
	probeCap := quota / probeCapDivisor
	if !w.probing || grew || used < budget*3/4 || budget >= probeCap {
		return w, budget, ""
	}
	next := min(2*budget, probeCap)
	return w, next, fmt.Sprintf("%s per compaction: etcd's file is %s, past 3/4 of the %s quota, yet it did not grow while the run's writes not compacted held %s: they landed in pages freed before, so the budget doubles while the file stays, to at most 1/16 of the quota",
		bytesText(next), bytesText(file), bytesText(quota), bytesText(used))
}

// probeCapDivisor: a probing budget grows to 1/16 of the quota at most.
const probeCapDivisor = 16

// checkFile reads the file's size when a read is due, and sets the budget
// judgeFile gives.
func (s *spaceBudget) checkFile(ctx context.Context) {
	if s.off() || s.fileSize == nil {
		return
	}
	s.mu.Lock()
	due := s.watch.watching() && time.Since(s.lastFileCheck) >= fileCheckEvery
	if due {
		s.lastFileCheck = time.Now()
	}
	s.mu.Unlock()
	if !due {
		return
	}
	file, err := s.fileSize(ctx)
	if err != nil || file <= 0 {
		return
	}
	s.mu.Lock()
	watch, budget, reason := judgeFile(s.watch, s.budget, file)
	s.watch = watch
	if reason == "" {
		s.mu.Unlock()
		return
	}
	if !watch.credited && !watch.probing && budget < s.budget {
		// The credit is gone: the chain of runs starts again at the file.
		s.ledger = SpaceLedger{InUse: file, Peak: s.outstanding}
	}
	s.budget = budget
	onRebudget := s.onRebudget
	s.mu.Unlock()
	klog.FromContext(ctx).Info("the etcd space budget changed with etcd's file", "file", bytesText(file), "budget", bytesText(budget), "reason", reason)
	if onRebudget != nil {
		onRebudget(reason)
	}
}

// spaceChunk is writes whose bytes are freed together.
type spaceChunk struct {
	bytes    int64
	pending  int    // writes not answered yet
	revision uint64 // the highest revision its writes were given
}

// inherit charges the writes of the runs before that no compaction is
// known to have freed (SpaceLedger.Outstanding) as a chunk of their own,
// freed once etcd compacted past their last revision.
func (s *spaceBudget) inherit(prev SpaceLedger) {
	s.ledger.Peak = max(s.ledger.Peak, prev.Peak)
	if s.off() || prev.Outstanding <= 0 || prev.Revision == 0 {
		return
	}
	s.chunks = append(s.chunks, &spaceChunk{bytes: prev.Outstanding, revision: prev.Revision})
	s.outstanding += prev.Outstanding
	s.ledger.Peak = max(s.ledger.Peak, s.outstanding)
}

// settle frees the chunks etcd compacted past by now, so that the ledger
// the run hands on charges the run that follows only writes no compaction
// freed yet (a chunk is otherwise freed only when a write waits for it).
func (s *spaceBudget) settle(ctx context.Context) {
	if ctx.Err() == nil {
		s.release(ctx, true)
	}
}

// Ledger is what the budget tells the run that follows it.
func (s *spaceBudget) Ledger() SpaceLedger {
	if s.off() {
		return SpaceLedger{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.ledger
	l.Outstanding = s.outstanding
	for _, c := range s.chunks {
		l.Revision = max(l.Revision, c.revision)
	}
	if l.Revision == 0 {
		l.Outstanding = 0
	}
	return l
}

// charges is what every writer charged so far.
func (s *spaceBudget) charges() map[Writer]Charge {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Writer]Charge, len(s.charged))
	for w, c := range s.charged {
		out[w] = c
	}
	return out
}

// chunkDivisor: a chunk holds about a quarter of the budget.
const chunkDivisor = 4

func (s *spaceBudget) off() bool { return s == nil || s.budget < 0 }

// cost is what the next write is charged: the mean of the objects sampled,
// or, when larger, the largest sampled in its page.
func (s *spaceBudget) cost() int64 {
	if s.samples == 0 {
		return WriteCost(defaultObjectBytes)
	}
	return WriteCost(max(s.sampleBytes/s.samples, s.pageBytes))
}

// sampledPage adds the sizes of a page's sampled objects to the mean, and
// charges the page's writes at least the largest of them. A page is a range
// of names: where sizes follow the names (a client's small objects named
// apart from large ones), its first object alone can be the small end of
// it, and the mean of the pages before it too; its first and its last
// bound it. The quota rig of the robustness suite raised NOSPACE when only
// the first was sampled (docs/reliability.md).
func (s *spaceBudget) sampledPage(objectBytes ...int64) {
	if s.off() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageBytes = 0
	for _, n := range objectBytes {
		if n <= 0 {
			continue
		}
		s.sampleBytes += n
		s.samples++
		s.pageBytes = max(s.pageBytes, n)
	}
}

// tryReserve charges one write of w to the open chunk when the budget
// allows it (a write always goes when nothing is outstanding) and returns
// the chunk to tell when it is answered, or false.
func (s *spaceBudget) tryReserve(w Writer) (*spaceChunk, bool) {
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
	s.ledger.Peak = max(s.ledger.Peak, s.outstanding)
	s.watch.used = max(s.watch.used, s.outstanding)
	if s.charged == nil {
		s.charged = map[Writer]Charge{}
	}
	charge := s.charged[w]
	charge.Writes++
	charge.Bytes += c
	s.charged[w] = charge
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

// reserve lets one more write of w go once the budget allows it, waiting
// for compactions while the bytes not compacted yet would pass it; onWait
// is called when a wait starts, with the revision it waits for, and
// waited when it ends. It returns the chunk the write is charged to.
func (s *spaceBudget) reserve(ctx context.Context, w Writer, onWait func(rev string), waited func()) (*spaceChunk, error) {
	if s.off() {
		return nil, nil
	}
	s.checkFile(ctx)
	s.release(ctx, false)
	if chunk, ok := s.tryReserve(w); ok {
		return chunk, nil
	}
	waiting := false
	defer func() {
		if waiting && waited != nil {
			waited()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			// A run stopped while its dispatcher hands out a page: no
			// wait starts (each would count one).
			return nil, err
		}
		rev := s.release(ctx, true)
		if chunk, ok := s.tryReserve(w); ok {
			if waiting {
				// etcd deletes what it compacted in the background.
				if err := sleep(ctx, compactionSettle); err != nil {
					s.done(chunk, "")
					return nil, err
				}
			}
			return chunk, nil
		}
		if !waiting && rev != "" {
			waiting = true
			if onWait != nil {
				onWait(rev)
			}
		}
		if err := sleep(ctx, compactionPoll); err != nil {
			return nil, err
		}
	}
}

// reserveSpace is reserve for the run's writer w, the wait shown in the
// progress. Only the dispatcher calls it.
func (r *runner) reserveSpace(ctx context.Context, w Writer) (*spaceChunk, error) {
	return r.space.reserve(ctx, w, func(rev string) { r.startWait(ctx, rev) }, func() {
		r.mu.Lock()
		r.progress.CompactionWait = ""
		r.mu.Unlock()
		r.notify()
		r.writers.RestartWindow()
	})
}

// startWait shows in the progress that the run waits for a compaction.
func (r *runner) startWait(ctx context.Context, rev string) {
	r.mu.Lock()
	r.progress.CompactionWaits++
	r.progress.CompactionWait = fmt.Sprintf("waiting for etcd's next compaction past resourceVersion %s since %s: the run's writes not compacted yet reached its budget of %s%s",
		rev, time.Now().UTC().Format(time.RFC3339), bytesText(r.space.currentBudget()), r.quotaHint())
	r.mu.Unlock()
	klog.FromContext(ctx).Info("waiting for etcd to compact", "resource", r.opts.Resource.String(), "resourceVersion", rev, "budget", bytesText(r.space.currentBudget()))
	r.notify()
}

// quotaHint is what a wait adds when etcd's quota was not told: telling
// it can lift the wait, and where to tell it.
func (r *runner) quotaHint() string {
	if r.opts.EtcdQuota > 0 {
		return ""
	}
	setting := r.opts.EtcdQuotaSetting
	if setting == "" {
		setting = "Options.EtcdQuota"
	}
	if r.progress.DatabaseSize > 0 {
		return fmt.Sprintf("; etcd's quota is not told, so its default %s is assumed: if the quota is larger, tell it with %s to raise the budget",
			bytesText(DefaultEtcdQuota), setting)
	}
	return fmt.Sprintf("; etcd's database size is unknown and its quota not told: tell the quota with %s to raise the budget", setting)
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
	space := spaceInputs{budget: r.opts.SpaceBudget, quota: r.opts.EtcdQuota, previous: r.opts.Previous, metrics: r.metrics}
	r.space, r.progress.SpaceBudgetReason, r.progress.DatabaseSize = space.newBudget(ctx, r.objects.compacted, r.opts.Resource.String())
	r.progress.SpaceBudget = r.space.budget
	r.space.onRebudget = func(reason string) {
		r.mu.Lock()
		r.progress.SpaceBudget, r.progress.SpaceBudgetReason = r.space.currentBudget(), reason
		r.mu.Unlock()
		r.notify()
	}
}

// currentBudget is the budget now (checkFile can lower it).
func (s *spaceBudget) currentBudget() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.budget
}

// spaceInputs are what a writer's budget is set from: Options' SpaceBudget,
// EtcdQuota and Previous, and the API server's /metrics.
type spaceInputs struct {
	budget, quota int64
	previous      SpaceLedger
	metrics       func(context.Context) ([]byte, error)
}

// newBudget is the budget of the inputs, its reason and the database's
// size it read (0 when unknown).
func (in spaceInputs) newBudget(ctx context.Context, compacted func(context.Context, string) (bool, error), resource string) (*spaceBudget, string, int64) {
	s := &spaceBudget{budget: in.budget, compacted: compacted}
	switch {
	case s.budget < 0:
		return s, "off", 0
	case s.budget > 0:
		s.ledger.InUse = in.previous.InUse
		s.inherit(in.previous)
		return s, fmt.Sprintf("%s per compaction, as set", bytesText(s.budget)), 0
	}
	space, err := etcdSpace(ctx, in.metrics, in.quota)
	space.Previous = in.previous
	var reason string
	s.budget, reason = SpaceBudgetFor(space)
	s.ledger.InUse = in.previous.inUse(space.DatabaseSize)
	s.inherit(in.previous)
	if s.budget > 0 && space.DatabaseSize > 0 {
		s.watch = newFileWatch(space.DatabaseSize, s.ledger.InUse, s.budget, in.quota)
		s.fileSize = fileSizeReader(in.metrics)
	}
	if err != nil {
		text := err.Error()
		if len(text) > maxReasonError {
			text = text[:maxReasonError] + "..."
		}
		reason += "; etcd's database size is unknown: " + text
		klog.FromContext(ctx).Info("the etcd space budget cannot read the database's size; a conservative budget applies",
			"resource", resource, "budget", bytesText(s.budget), "err", err.Error())
	}
	if space.SizeUnreported {
		klog.FromContext(ctx).Info("the API server reports no storage size: the etcd space budget is "+reason, "resource", resource)
	}
	return s, reason, space.DatabaseSize
}

// newFileWatch is what a budget of budget, set from a file of size file
// of which inUse is counted in use, watches: credited when it counted
// freed pages, probing when the file is past the ceiling and the budget
// under 1/16 of the quota (at its floor, or a credit of a few freed pages
// only): whatever the ledger counted, the file then shows whether the
// run's writes land in free pages.
func newFileWatch(file, inUse, budget, quota int64) fileWatch {
	q := quota
	if q <= 0 {
		q = DefaultEtcdQuota
	}
	return fileWatch{allowed: max(file, inUse+budget), lastFile: file, quota: quota,
		credited: inUse < file, probing: file >= ceiling(q) && budget < q/probeCapDivisor}
}

// fileSizeReader reads etcd's file size from /metrics (0 when it carries
// none).
func fileSizeReader(metrics func(context.Context) ([]byte, error)) func(context.Context) (int64, error) {
	if metrics == nil {
		return nil
	}
	return func(ctx context.Context) (int64, error) {
		data, err := metrics(ctx)
		if err != nil {
			return 0, err
		}
		size, _ := parseStorageSize(data)
		return size, nil
	}
}

// storageSizeReads is how many times a /metrics without the storage size
// is read before the size counts as unreported, storageSizeRetry apart:
// the API server asks etcd for it at each scrape, within a second, so a
// loaded etcd can miss one. A variable for the tests.
var storageSizeReads, storageSizeRetry = 3, time.Second

// etcdSpace reads the etcd database's size from the API server; the error
// says why it is unknown (not when the storage reports none).
func etcdSpace(ctx context.Context, metrics func(context.Context) ([]byte, error), quota int64) (EtcdSpace, error) {
	space := EtcdSpace{Quota: quota}
	if metrics == nil {
		return space, fmt.Errorf("no rest.Config (Options.Config) to read the API server's /metrics with")
	}
	for read := 1; ; read++ {
		data, err := metrics(ctx)
		if err != nil {
			return space, fmt.Errorf("read the API server's /metrics (the chart grants get on it): %w", err)
		}
		if size, ok := parseStorageSize(data); ok {
			space.DatabaseSize = size
			return space, nil
		}
		if read == storageSizeReads {
			space.SizeUnreported = true
			return space, nil
		}
		if err := sleep(ctx, storageSizeRetry); err != nil {
			return space, err
		}
	}
}
