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
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// etcdModel is etcd's database as the budget sees it: the bytes in use
// (live objects, and revisions not compacted yet) and its file, which
// grows when they pass it and shrinks only at a defragmentation.
type etcdModel struct {
	live, uncompacted, file int64
	// garbage is what others write in each compaction window.
	garbage int64
	// scatterPct is how much more than they are charged the run's writes
	// grow the file, in percent (bbolt's pages around large values).
	scatterPct int64
}

func (e *etcdModel) write(n int64) {
	e.uncompacted += n
	e.file = max(e.file, e.live+e.uncompacted)
}

// writeRun is a write of the run charged n.
func (e *etcdModel) writeRun(n int64) { e.write(n + n*e.scatterPct/100) }

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
func (e *etcdModel) graduate(quota int64, prev Ledger, objects, cost int64, killAfter int64) (Ledger, int, int64) {
	budget, _ := BudgetFor(Etcd{DatabaseSize: e.file, Quota: quota, Previous: prev})
	s := &Budget{budget: budget, sampleBytes: cost*4/5 - 512, samples: 1}
	s.ledger.InUse = prev.inUse(e.file)
	s.inherit(prev)
	s.watch = newFileWatch(e.file, s.ledger.InUse, budget, quota)
	s.fileSize = func(context.Context) (int64, error) { return e.file, nil }
	windows, rev := 0, uint64(100)
	for written := int64(0); written < objects; {
		// The file read once per compaction window (fileCheckEvery 0).
		s.checkFile(context.Background())
		e.write(e.garbage) // others' writes of the window, freed with the run's
		for written < objects {
			if killAfter > 0 && written == killAfter {
				return s.Ledger(), windows, budget
			}
			chunk, ok := s.tryReserve(WriterPass)
			if !ok {
				break
			}
			e.writeRun(s.cost())
			rev++
			s.Done(chunk, fmt.Sprint(rev))
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
	return s.Ledger(), windows, s.Current()
}

var _ = Describe("a run that follows another (Ledger)", func() {
	const quota = 64 * mib
	ceiling := quota * 3 / 4

	DescribeTable("BudgetFor after other runs",
		func(space Etcd, want int64, reason string) {
			got, why := BudgetFor(space)
			Expect(got).To(Equal(want), "budget %s", BytesText(got))
			Expect(why).To(ContainSubstring(reason))
		},
		Entry("a resume after a run grew the file to the ceiling: the first run's budget",
			Etcd{DatabaseSize: 48 * mib, Quota: quota, Previous: Ledger{InUse: 40 * mib, Peak: 8 * mib}}, 8*mib, "its file is 48Mi: 8Mi of it is pages the runs before this one freed"),
		Entry("no ledger: the file alone, the floor",
			Etcd{DatabaseSize: 48 * mib, Quota: quota}, quota/64, "at least 1/64"),
		Entry("the runs' writes grew the file a quarter more than their peak (the pages around them): still the first run's budget",
			Etcd{DatabaseSize: 50 * mib, Quota: quota, Previous: Ledger{InUse: 40 * mib, Peak: 8 * mib}}, 8*mib, "10Mi of it is pages the runs before this one freed"),
		Entry("others grew the database past that: their growth counts",
			Etcd{DatabaseSize: 54 * mib, Quota: quota, Previous: Ledger{InUse: 40 * mib, Peak: 8 * mib}}, 4*mib, "44Mi of its 64Mi quota"),
		Entry("a run killed early grew the file less: only its peak is credited",
			Etcd{DatabaseSize: 42 * mib, Quota: quota, Previous: Ledger{InUse: 40 * mib, Peak: 8 * mib}}, 8*mib, "40Mi of its 64Mi quota"),
		Entry("a defragmented database: the file, smaller than what the runs counted",
			Etcd{DatabaseSize: 30 * mib, Quota: quota, Previous: Ledger{InUse: 40 * mib, Peak: 8 * mib}}, 18*mib, "30Mi of its 64Mi quota"),
		Entry("the quota not told: the in-use part against the assumed default",
			Etcd{DatabaseSize: 1700 * mib, Previous: Ledger{InUse: 1100 * mib, Peak: 436 * mib}}, 1536*mib-1155*mib, "default 2Gi is assumed"),
	)

	DescribeTable("keeps the pace of the first run for a resume and a fleet of CRDs in a row, and stays under the ceiling", func(scatterPct int64) {
		DeferCleanup(func(every time.Duration) { fileCheckEvery = every }, fileCheckEvery)
		fileCheckEvery = 0
		e := &etcdModel{live: 40 * mib, file: 40 * mib, scatterPct: scatterPct}
		cost := WriteCost(240 << 10)
		const objects = 120

		first, firstWindows, firstBudget := e.graduate(quota, Ledger{}, objects, cost, 0)
		// The ceiling bounds what the writes are charged; the file takes
		// the pages around them too.
		ceiling := ceiling + firstBudget*scatterPct/100
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
		// What others put in the freed pages is what the credit missed: the
		// file passes the ceiling by that much at most (here 8 of their 10
		// MiB went into freed pages, and the run's budget came on top),
		// then the budget is the floor.
		Expect(e.file).To(BeNumerically("<=", ceiling+10*mib), "past the ceiling by the others' data at most")
	},
		Entry("writes that grow the file by what they are charged", int64(0)),
		Entry("writes that grow the file 15% more than they are charged, as 16 KB objects did in test/quota", int64(15)),
		Entry("writes that grow the file by a quarter more", int64(25)),
	)

	It("probes for free pages when others' writes grew the file past what the runs before counted", func() {
		DeferCleanup(func(every time.Duration) { fileCheckEvery = every }, fileCheckEvery)
		fileCheckEvery = 0
		// The quota rig's case: a concurrent client rewrites padded
		// objects during the first run, and its revisions grow the file as
		// the run's do.
		e := &etcdModel{live: 40 * mib, file: 40 * mib, garbage: 8 * mib}
		cost := WriteCost(240 << 10)
		const objects = 120
		first, firstWindows, firstBudget := e.graduate(quota, Ledger{}, objects, cost, 0)
		Expect(e.file).To(BeNumerically(">", ceiling+firstBudget/2), "the client's writes grew the file past the ceiling")

		before := e.file
		resumed, resumedWindows, resumedBudget := e.graduate(quota, first, objects, cost, 0)
		Expect(resumedBudget).To(Equal(quota/probeCapDivisor), "probed up to 1/16 of the quota")
		Expect(e.file).To(Equal(before), "the probe's writes landed in free pages: the file did not grow")
		GinkgoWriter.Printf("first run: budget %s, %d windows; the next: %d windows (at the floor throughout: %d)\n",
			BytesText(firstBudget), firstWindows, resumedWindows, (objects*cost+quota/64-1)/(quota/64))
		Expect(resumedWindows).To(BeNumerically("<", (objects*cost)/(quota/64)/2), "less than half the windows of the floor")
		_ = resumed
	})

	DescribeTable("judgeFile: the budget after a read of etcd's file",
		func(w fileWatch, budget, file, want int64, reason string) {
			next, got, why := judgeFile(w, budget, file)
			Expect(got).To(Equal(want), "budget %s", BytesText(got))
			Expect(why).To(ContainSubstring(reason))
			Expect(next.used).To(BeZero(), "a new window")
		},
		Entry("credited, the file did not grow: unchanged",
			fileWatch{allowed: 48 * mib, lastFile: 48 * mib, used: 8 * mib, quota: quota, credited: true}, 8*mib, 48*mib, 8*mib, ""),
		Entry("credited, grown within a quarter of the budget (scattered pages): unchanged",
			fileWatch{allowed: 48 * mib, lastFile: 48 * mib, quota: quota, credited: true}, 8*mib, 50*mib, 8*mib, ""),
		Entry("credited, grown past it: others took the freed pages, the file's budget",
			fileWatch{allowed: 48 * mib, lastFile: 48 * mib, quota: quota, credited: true}, 8*mib, 51*mib, quota/64, "they were not all free"),
		Entry("probing, the file did not grow while the run held its budget: doubled",
			fileWatch{allowed: 49 * mib, lastFile: 48 * mib, used: mib, quota: quota, probing: true}, mib, 48*mib, 2*mib, "the budget doubles"),
		Entry("probing, to 1/16 of the quota at most",
			fileWatch{allowed: 49 * mib, lastFile: 48 * mib, used: 3 * mib, quota: quota, probing: true}, 3*mib, 48*mib, 4*mib, "at most 1/16"),
		Entry("probing, the run held less than 3/4 of its budget: no evidence, unchanged",
			fileWatch{allowed: 49 * mib, lastFile: 48 * mib, used: mib / 2, quota: quota, probing: true}, mib, 48*mib, mib, ""),
		Entry("probing, the file grew a little: unchanged",
			fileWatch{allowed: 49 * mib, lastFile: 48 * mib, used: mib, quota: quota, probing: true}, mib, 48*mib+mib/8, mib, ""),
		Entry("probing, the file grew past what it may reach: back to the floor",
			fileWatch{allowed: 49 * mib, lastFile: 48 * mib, used: 4 * mib, quota: quota, probing: true}, 4*mib, 51*mib, quota/64, "they were not all free"),
		Entry("not credited nor probing: never raised",
			fileWatch{allowed: 48 * mib, lastFile: 40 * mib, used: 8 * mib, quota: quota}, 8*mib, 40*mib, 8*mib, ""),
	)

	It("charges a killed run's writes not compacted yet to the run that resumes it", func() {
		s := &Budget{budget: 8 * mib}
		s.inherit(Ledger{InUse: 40 * mib, Peak: 6 * mib, Outstanding: 6 * mib, Revision: 900})
		Expect(s.outstanding).To(Equal(6 * mib))
		l := s.Ledger()
		Expect(l.Revision).To(Equal(uint64(900)))
		Expect(l.Outstanding).To(Equal(6 * mib))
		Expect(slices.ContainsFunc(s.chunks, func(c *Chunk) bool { return c.revision == 900 && c.pending == 0 })).To(BeTrue(),
			"freed once etcd compacted past the killed run's last write")
	})
})

var _ = Describe("the ledger a run hands on", func() {
	It("charges the run that follows only the writes no compaction freed yet", func(ctx SpecContext) {
		s := &Budget{budget: 8 * mib, compacted: func(_ context.Context, rv string) (bool, error) {
			return rv <= "150", nil
		}}
		s.chunks = []*Chunk{{bytes: 2 * mib, revision: 120}, {bytes: 2 * mib, revision: 140}, {bytes: 2 * mib, revision: 180}}
		s.outstanding = 6 * mib
		s.Settle(ctx)
		Expect(s.Ledger()).To(Equal(Ledger{Outstanding: 2 * mib, Revision: 180}), "etcd compacted to 150 since the run's last wait")
	})
})
