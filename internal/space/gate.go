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
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// compactionPoll is how often a run that waits asks whether the compaction
// came; compactionSettle lets etcd delete the compacted revisions (it does
// so in the background) before writes go on. Variables for the tests.
var compactionPoll, compactionSettle = 2 * time.Second, 2 * time.Second

// Budget is a run's budget in flight: the bytes its writes added to
// etcd that no compaction has freed yet, in chunks of about a quarter of
// the budget, oldest first. A chunk is freed once etcd compacted past the
// last revision its writes were given; so the run goes on writing while
// the oldest chunks wait for their compaction, and stops only when the
// bytes not compacted yet would pass the budget.
type Budget struct {
	budget int64 // < 0: off
	// compacted tells whether etcd compacted past a revision: a read at
	// exactly that resourceVersion answers 410 Gone once it did.
	compacted func(ctx context.Context, resourceVersion string) (bool, error)

	mu          sync.Mutex
	chunks      []*Chunk // oldest first; the last one is open
	outstanding int64    // the bytes of every chunk
	sampleBytes int64
	samples     int64
	// pageBytes is the largest object sampled in the page being
	// dispatched: its writes are charged at least that.
	pageBytes int64
	lastProbe time.Time
	// ledger is what the budget tells the run that follows: InUse from the
	// start, Peak as it goes (see Ledger).
	ledger Ledger
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

	// pool is the budget this one shares with every other writer to the
	// same etcd (nil: its own): its writes wait while all of theirs
	// together hold the pool's limit.
	pool *Pool
	// started is when the budget was set, and freed the bytes of its
	// writes compactions freed since: the pace an Outlook tells.
	started time.Time
	freed   int64
}

// checkFile reads the file's size when a read is due, and sets the budget
// judgeFile gives.
func (s *Budget) checkFile(ctx context.Context) {
	if s.Off() || s.fileSize == nil {
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
		s.ledger = Ledger{InUse: file, Peak: s.outstanding}
	}
	s.budget = budget
	onRebudget := s.onRebudget
	s.mu.Unlock()
	klog.FromContext(ctx).Info("the etcd space budget changed with etcd's file", "file", BytesText(file), "budget", BytesText(budget), "reason", reason)
	if onRebudget != nil {
		onRebudget(reason)
	}
}

// Chunk is writes whose bytes are freed together.
type Chunk struct {
	bytes    int64
	pending  int    // writes not answered yet
	revision uint64 // the highest revision its writes were given
}

// inherit charges the writes of the runs before that no compaction is
// known to have freed (Ledger.Outstanding) as a chunk of their own,
// freed once etcd compacted past their last revision.
func (s *Budget) inherit(prev Ledger) {
	s.ledger.Peak = max(s.ledger.Peak, prev.Peak)
	if s.Off() || prev.Outstanding <= 0 || prev.Revision == 0 {
		return
	}
	s.chunks = append(s.chunks, &Chunk{bytes: prev.Outstanding, revision: prev.Revision})
	s.outstanding += prev.Outstanding
	if s.pool != nil {
		s.pool.add(prev.Outstanding, prev.Revision)
	}
	s.ledger.Peak = max(s.ledger.Peak, s.outstanding)
}

// Settle frees the chunks etcd compacted past by now, so that the ledger
// the run hands on charges the run that follows only writes no compaction
// freed yet (a chunk is otherwise freed only when a write waits for it).
func (s *Budget) Settle(ctx context.Context) {
	if ctx.Err() == nil {
		s.release(ctx, true)
	}
}

// Ledger is what the budget tells the run that follows it.
func (s *Budget) Ledger() Ledger {
	if s.Off() {
		return Ledger{}
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

// Charges is what every writer charged so far.
func (s *Budget) Charges() map[Writer]Charge {
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

// Off tells whether the budget is off: nil, or set below 0.
func (s *Budget) Off() bool { return s == nil || s.budget < 0 }

// cost is what the next write is charged: the mean of the objects sampled,
// or, when larger, the largest sampled in its page.
func (s *Budget) cost() int64 {
	if s.samples == 0 {
		return WriteCost(defaultObjectBytes)
	}
	return WriteCost(max(s.sampleBytes/s.samples, s.pageBytes))
}

// SampledPage adds the sizes of a page's sampled objects to the mean, and
// charges the page's writes at least the largest of them. A page is a range
// of names: where sizes follow the names (a client's small objects named
// apart from large ones), its first object alone can be the small end of
// it, and the mean of the pages before it too; its first and its last
// bound it. The quota rig of the robustness suite raised NOSPACE when only
// the first was sampled (docs/reliability.md).
func (s *Budget) SampledPage(objectBytes ...int64) {
	if s.Off() {
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
func (s *Budget) tryReserve(w Writer) (*Chunk, bool) {
	if s.Off() {
		return nil, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cost()
	held, limit := s.outstanding, s.budget
	if s.pool != nil {
		held, limit = s.pool.held(), min(limit, s.pool.limit())
	}
	if s.outstanding > 0 && held+c > limit {
		return nil, false
	}
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].bytes >= s.budget/chunkDivisor {
		s.chunks = append(s.chunks, &Chunk{})
	}
	chunk := s.chunks[len(s.chunks)-1]
	chunk.bytes += c
	chunk.pending++
	s.outstanding += c
	if s.pool != nil {
		s.pool.add(c, 0)
	}
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

// Done ends a reserved write; rv is the resourceVersion it was given, empty
// when it stored nothing.
func (s *Budget) Done(chunk *Chunk, rv string) {
	if s.Off() || chunk == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	chunk.pending--
	if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
		chunk.revision = max(chunk.revision, v)
		if s.pool != nil {
			s.pool.add(0, v)
		}
	}
}

// oldest returns the revision the oldest chunk waits for, once every write
// of it was answered (ready); a chunk that stored nothing is dropped.
func (s *Budget) oldest() (rev uint64, ready bool) {
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
func (s *Budget) pop() {
	s.outstanding -= s.chunks[0].bytes
	s.freed += s.chunks[0].bytes
	if s.pool != nil {
		s.pool.add(-s.chunks[0].bytes, 0)
	}
	s.chunks = s.chunks[1:]
}

// release frees the oldest chunks etcd compacted since, asking at most once
// per compactionPoll unless force. It returns the revision it asked about
// last that was not compacted yet (0 when none).
func (s *Budget) release(ctx context.Context, force bool) string {
	if s.Off() {
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
	if s.pool != nil {
		s.pool.freeLeftover(ctx, s.compacted)
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

// Reserve lets one more write of w go once the budget allows it, waiting
// for compactions while the bytes not compacted yet would pass it; onWait
// is called when a wait starts, with the revision it waits for, and
// waited when it ends. It returns the chunk the write is charged to.
func (s *Budget) Reserve(ctx context.Context, w Writer, onWait func(rev string), waited func()) (*Chunk, error) {
	if s.Off() {
		return nil, nil
	}
	s.checkFile(ctx)
	if s.pool != nil {
		s.pool.renew(ctx, false)
	}
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
		if s.pool != nil {
			s.pool.renew(ctx, false)
		}
		rev := s.release(ctx, true)
		if chunk, ok := s.tryReserve(w); ok {
			if waiting {
				// etcd deletes what it compacted in the background.
				if err := sleep(ctx, compactionSettle); err != nil {
					s.Done(chunk, "")
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

// Current is the budget now (checkFile can lower it).
func (s *Budget) Current() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.budget
}

// OnRebudget sets what is told each new budget's reason when etcd's file
// changes it (checkFile). Set it before the first write.
func (s *Budget) OnRebudget(f func(reason string)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRebudget = f
}

// Leave ends the writer's part in the budget it shares (Pool): its bytes
// not compacted yet stay charged to the others, or, when it was the last,
// to the next writer. Call it once, after Settle and Ledger.
func (s *Budget) Leave(ctx context.Context) {
	if s == nil || s.pool == nil {
		return
	}
	s.mu.Lock()
	out, rev := s.outstanding, uint64(0)
	for _, c := range s.chunks {
		rev = max(rev, c.revision)
	}
	s.chunks, s.outstanding = nil, 0
	pool := s.pool
	s.pool = nil
	s.mu.Unlock()
	pool.leave(ctx, out, rev)
}

// Outlook says how long the writes of remaining more objects take at the
// pace compactions freed this budget's writes so far, and what an admin
// can do to go faster; "" before a compaction freed any.
func (s *Budget) Outlook(remaining int64) string {
	if s.Off() || remaining <= 0 {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return outlook(remaining*s.cost(), s.freed, time.Since(s.started), s.pool != nil && s.pool.shared())
}

// outlook is Outlook's text for remaining bytes to write, when
// compactions freed freed bytes in elapsed; shared tells whether other
// writers to the etcd hold part of the budget.
func outlook(remaining, freed int64, elapsed time.Duration, shared bool) string {
	if remaining <= 0 || freed <= 0 || elapsed <= 0 {
		return ""
	}
	perSecond := float64(freed) / elapsed.Seconds()
	rest := time.Duration(float64(remaining) / perSecond * float64(time.Second))
	others := ""
	if shared {
		others = " and the other writers to this etcd hold their part of the budget"
	}
	return fmt.Sprintf("; compactions free this run's writes at about %s a minute%s: the %s left take about %s more. To go faster, raise etcd's quota (and tell it), or defragment etcd (etcdctl defrag) to give the pages compactions freed back",
		BytesText(int64(perSecond*60)), others, BytesText(remaining), rest.Round(time.Second))
}
