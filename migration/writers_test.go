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
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

var _ = Describe("every writer of a graduation within the etcd space budget", func() {
	It("names each pass's writes as one of Writers", func() {
		for _, kind := range []passKind{mainPass, catchUpPass} {
			Expect(Writers).To(ContainElement(kind.writer()))
		}
		Expect(mainPass.writer()).NotTo(Equal(catchUpPass.writer()))
	})

	It("charges every write the API server took, of the run and of the managedFields cleanup", func(ctx SpecContext) {
		names := make([]string, 40)
		for i := range names {
			names[i] = fmt.Sprintf("w-%02d", i)
		}
		c := newFakeClient(names...)
		var mu sync.Mutex
		patches := 0 // the writes the fake API server took
		c.PrependReactor("patch", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			patches++
			mu.Unlock()
			return false, nil, nil
		})
		const budget = 64 << 20 // on, and never waited for
		res, err := Run(ctx, c, Options{Resource: fakeWidgets, Concurrency: 4, SpaceBudget: budget})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Complete).To(BeTrue())
		cleaned, err := CleanupManagedFieldsWithin(ctx, c, fakeWidgets, []string{"v2"}, CleanupOptions{SpaceBudget: budget, Previous: res.Space})
		Expect(err).NotTo(HaveOccurred())
		Expect(cleaned.Cleaned).To(Equal(len(names)))

		charged := map[Writer]Charge{}
		for _, charges := range []map[Writer]Charge{res.Charged, cleaned.Charged} {
			for w, ch := range charges {
				Expect(Writers).To(ContainElement(w), "a writer not named in Writers")
				charged[w] = Charge{Writes: charged[w].Writes + ch.Writes, Bytes: charged[w].Bytes + ch.Bytes}
			}
		}
		var writes int64
		for _, ch := range charged {
			writes += ch.Writes
		}
		mu.Lock()
		defer mu.Unlock()
		Expect(writes).To(Equal(int64(patches)), "every write charged once: %v", charged)
		Expect(charged[WriterPass].Writes).To(Equal(res.Rewritten))
		Expect(charged[WriterCleanup].Writes).To(Equal(int64(cleaned.Cleaned)), "the cleanup's patches are charged")
		Expect(charged[WriterCleanup].Bytes).To(BeNumerically(">=", int64(cleaned.Cleaned)*WriteCost(100)))
	})

	It("has the cleanup wait for a compaction when its budget is spent", func(ctx SpecContext) {
		c := newFakeClient("w-0", "w-1", "w-2")
		var waits []string
		waiting, stop := context.WithCancel(ctx)
		defer stop()
		_, err := CleanupManagedFieldsWithin(waiting, c, fakeWidgets, []string{"v2"}, CleanupOptions{
			SpaceBudget: 1, // one patch at a time
			Previous:    SpaceLedger{InUse: 1, Peak: 1, Outstanding: 1, Revision: 7},
			OnCompactionWait: func(why string) {
				waits = append(waits, why)
				stop()
			},
		})
		// The fake API server never answers 410 Gone: the inherited write at
		// revision 7 is never compacted, so the first patch waits until the
		// context ends.
		Expect(err).To(HaveOccurred())
		Expect(waits).NotTo(BeEmpty())
		Expect(waits[0]).To(ContainSubstring("past resourceVersion 7"))
		Expect(waits[0]).To(ContainSubstring("managedFields cleanup"))
	})
})

// etcdModel is etcd's database as the budget sees it: the bytes in use
// (live objects, and revisions not compacted yet) and its file, which
// grows when they pass it and shrinks only at a defragmentation.
type etcdModel struct {
	live, uncompacted, file int64
}

func (e *etcdModel) write(n int64) {
	e.uncompacted += n
	e.file = max(e.file, e.live+e.uncompacted)
}

func (e *etcdModel) compact() { e.uncompacted = 0 }

// others adds others' live data.
func (e *etcdModel) others(n int64) {
	e.live += n
	e.file = max(e.file, e.live+e.uncompacted)
}

// graduate runs objects rewrites of cost bytes each through a budget the
// rule sets from the file and prev, a compaction every window, killed
// after killAfter writes (0: not killed). It returns the run's ledger, the
// compaction windows it took, and its budget.
func (e *etcdModel) graduate(quota int64, prev SpaceLedger, objects, cost int64, killAfter int64) (SpaceLedger, int, int64) {
	budget, _ := SpaceBudgetFor(EtcdSpace{DatabaseSize: e.file, Quota: quota, Previous: prev})
	s := &spaceBudget{budget: budget, sampleBytes: cost*4/5 - 512, samples: 1}
	s.ledger.InUse = prev.inUse(e.file)
	s.inherit(prev)
	if s.ledger.InUse < e.file {
		s.credit, s.startFile, s.quota = e.file-s.ledger.InUse, e.file, quota
		s.fileSize = func(context.Context) (int64, error) { return e.file, nil }
	}
	windows, rev := 0, uint64(100)
	for written := int64(0); written < objects; {
		for written < objects {
			if killAfter > 0 && written == killAfter {
				return s.Ledger(), windows, budget
			}
			s.checkFile(context.Background())
			chunk, ok := s.tryReserve(WriterPass)
			if !ok {
				break
			}
			e.write(s.cost())
			rev++
			s.done(chunk, fmt.Sprint(rev))
			written++
		}
		// A compaction: every chunk is freed.
		e.compact()
		s.mu.Lock()
		for len(s.chunks) > 0 {
			s.pop()
		}
		s.mu.Unlock()
		windows++
	}
	return s.Ledger(), windows, s.currentBudget()
}

var _ = Describe("a run that follows another (SpaceLedger)", func() {
	const quota = 64 * mib
	ceiling := quota * 3 / 4

	DescribeTable("SpaceBudgetFor after other runs",
		func(space EtcdSpace, want int64, reason string) {
			got, why := SpaceBudgetFor(space)
			Expect(got).To(Equal(want), "budget %s", bytesText(got))
			Expect(why).To(ContainSubstring(reason))
		},
		Entry("a resume after a run grew the file to the ceiling: the first run's budget",
			EtcdSpace{DatabaseSize: 48 * mib, Quota: quota, Previous: SpaceLedger{InUse: 40 * mib, Peak: 8 * mib}}, 8*mib, "its file is 48Mi: 8Mi of it is pages the runs before this one freed"),
		Entry("no ledger: the file alone, the floor",
			EtcdSpace{DatabaseSize: 48 * mib, Quota: quota}, quota/64, "at least 1/64"),
		Entry("others grew the database past the runs' peak: their growth counts",
			EtcdSpace{DatabaseSize: 52 * mib, Quota: quota, Previous: SpaceLedger{InUse: 40 * mib, Peak: 8 * mib}}, 4*mib, "44Mi of its 64Mi quota"),
		Entry("a run killed early grew the file less: only its peak is credited",
			EtcdSpace{DatabaseSize: 42 * mib, Quota: quota, Previous: SpaceLedger{InUse: 40 * mib, Peak: 8 * mib}}, 8*mib, "40Mi of its 64Mi quota"),
		Entry("a defragmented database: the file, smaller than what the runs counted",
			EtcdSpace{DatabaseSize: 30 * mib, Quota: quota, Previous: SpaceLedger{InUse: 40 * mib, Peak: 8 * mib}}, 18*mib, "30Mi of its 64Mi quota"),
		Entry("the quota not told: the in-use part against the assumed default",
			EtcdSpace{DatabaseSize: 1600 * mib, Previous: SpaceLedger{InUse: 1100 * mib, Peak: 436 * mib}}, 1536*mib-1164*mib, "default 2Gi is assumed"),
	)

	It("keeps the pace of the first run for a resume and a fleet of CRDs in a row, and stays under the ceiling", func() {
		DeferCleanup(func(every time.Duration) { fileCheckEvery = every }, fileCheckEvery)
		fileCheckEvery = 0
		e := &etcdModel{live: 40 * mib, file: 40 * mib}
		cost := WriteCost(240 << 10)
		const objects = 120

		first, firstWindows, firstBudget := e.graduate(quota, SpaceLedger{}, objects, cost, 0)
		Expect(e.file).To(BeNumerically("<=", ceiling))
		Expect(e.file).To(BeNumerically(">", 40*mib+firstBudget/2), "the first run grew the file")

		By("a run killed at half its pass and resumed")
		killed, _, _ := e.graduate(quota, first, objects, cost, objects/2)
		resumed, resumedWindows, resumedBudget := e.graduate(quota, killed, objects/2, cost, 0)
		Expect(resumedBudget).To(Equal(firstBudget))
		Expect(resumedWindows).To(BeNumerically("<=", firstWindows/2+1))
		Expect(e.file).To(BeNumerically("<=", ceiling))

		By("the next CRDs of a fleet")
		prev := resumed
		for i := range 5 {
			var windows int
			var budget int64
			prev, windows, budget = e.graduate(quota, prev, objects, cost, 0)
			Expect(budget).To(Equal(firstBudget), "CRD %d", i+2)
			Expect(windows).To(BeNumerically("<=", firstWindows), "CRD %d", i+2)
			Expect(e.file).To(BeNumerically("<=", ceiling), "CRD %d", i+2)
		}

		By("others adding data between two CRDs, into the pages the runs freed: the file's growth while the run writes gives it away")
		e.others(10 * mib)
		_, _, budget := e.graduate(quota, prev, objects, cost, 0)
		Expect(budget).To(Equal(quota/64), "back to the file's budget")
		Expect(e.file).To(BeNumerically("<=", ceiling+2*firstBudget/chunkDivisor), "past the ceiling by less than the guard's slack and a chunk")
	})

	DescribeTable("creditHolds: the file while a run writes into pages counted as free",
		func(startFile, inUse, budget, file int64, holds bool) {
			Expect(creditHolds(startFile, inUse, budget, file)).To(Equal(holds))
		},
		Entry("the file did not grow", 48*mib, 40*mib, 8*mib, 48*mib, true),
		Entry("grew within a chunk of the budget (scattered pages)", 48*mib, 40*mib, 8*mib, 50*mib, true),
		Entry("grew past it: others took the freed pages", 48*mib, 40*mib, 8*mib, 51*mib, false),
		Entry("a credit smaller than the budget: the file may reach in-use plus the budget", 44*mib, 40*mib, 8*mib, 48*mib, true),
	)

	It("charges a killed run's writes not compacted yet to the run that resumes it", func() {
		s := &spaceBudget{budget: 8 * mib}
		s.inherit(SpaceLedger{InUse: 40 * mib, Peak: 6 * mib, Outstanding: 6 * mib, Revision: 900})
		Expect(s.outstanding).To(Equal(6 * mib))
		l := s.Ledger()
		Expect(l.Revision).To(Equal(uint64(900)))
		Expect(l.Outstanding).To(Equal(6 * mib))
		Expect(slices.ContainsFunc(s.chunks, func(c *spaceChunk) bool { return c.revision == 900 && c.pending == 0 })).To(BeTrue(),
			"freed once etcd compacted past the killed run's last write")
	})
})
