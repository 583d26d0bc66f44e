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
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

const mib = int64(1) << 20

var _ = Describe("the etcd space budget", func() {
	DescribeTable("BudgetFor: the bytes a run may add to etcd between two compactions",
		func(space Etcd, want int64, reason string) {
			got, why := BudgetFor(space)
			Expect(got).To(Equal(want), "budget %s", BytesText(got))
			Expect(why).To(ContainSubstring(reason))
		},
		Entry("the quota told: up to 3/4 of it", Etcd{DatabaseSize: 110 * mib, Quota: 192 * mib}, 34*mib, "of its 192Mi quota"),
		Entry("the quota told, the database past 3/4 already: 1/64 of the quota", Etcd{DatabaseSize: 170 * mib, Quota: 192 * mib}, 3*mib, "at least 1/64"),
		Entry("a big quota told and a small database: not slowed", Etcd{DatabaseSize: 100 * mib, Quota: 8192 * mib}, 6044*mib, "8Gi quota"),
		Entry("the quota told, no database size (no /metrics): 1/16 of it", Etcd{Quota: 2048 * mib}, 128*mib, "1/16"),
		Entry("the quota told, /metrics without a storage size: 1/16 of it", Etcd{Quota: 2048 * mib, SizeUnreported: true}, 128*mib, "1/16"),
		// The quota not told: etcd's default 2 GiB is assumed.
		Entry("not told, a newcomer's small database: 3/4 of etcd's default 2Gi less the database", Etcd{DatabaseSize: 20 * mib}, 1516*mib, "default 2Gi is assumed"),
		Entry("not told, an empty database: 3/4 of 2Gi", Etcd{DatabaseSize: 1}, 1536*mib-1, "default 2Gi is assumed"),
		Entry("not told, a database just under 60% of 2Gi: still 3/4 of 2Gi less the database", Etcd{DatabaseSize: 1200 * mib}, 336*mib, "default 2Gi is assumed"),
		Entry("not told, a database large against 2Gi: a quarter of it", Etcd{DatabaseSize: 1600 * mib}, 400*mib, "a quarter of etcd's database"),
		Entry("not told, a database past 2Gi (its quota was raised): a quarter of it", Etcd{DatabaseSize: 8192 * mib}, 2048*mib, "a quarter of etcd's database"),
		Entry("nothing known (no /metrics): the fixed 16Mi", Etcd{}, MinBudget, "a fixed budget"),
		Entry("not told, /metrics without a storage size (kine): no budget", Etcd{SizeUnreported: true}, int64(-1), "no storage size"),
	)

	It("never budgets under 300 MiB with a database size and the quota not told", func() {
		for size := mib; size <= 16384*mib; size += 7 * mib {
			budget, _ := BudgetFor(Etcd{DatabaseSize: size})
			Expect(budget).To(BeNumerically(">=", 300*mib), "a database of %s", BytesText(size))
		}
	})

	It("reads the storage size from /metrics, and a /metrics that never carries one as unreported (kine)", func(ctx SpecContext) {
		defer func(n int, d time.Duration) { storageSizeReads, storageSizeRetry = n, d }(storageSizeReads, storageSizeRetry)
		storageSizeRetry = time.Millisecond
		reads := 0
		without := func(context.Context) ([]byte, error) { reads++; return []byte("apiserver_request_total 5\n"), nil }
		space, err := etcdSpace(ctx, without, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(space).To(Equal(Etcd{SizeUnreported: true}))
		Expect(reads).To(Equal(storageSizeReads), "read again: a loaded etcd can miss one scrape")

		reads = 0
		late := func(context.Context) ([]byte, error) {
			reads++
			if reads < 2 {
				return []byte("apiserver_request_total 5\n"), nil
			}
			return []byte("apiserver_storage_size_bytes{storage_cluster_id=\"etcd-0\"} 4.2e+07\n"), nil
		}
		Expect(etcdSpace(ctx, late, 192*mib)).To(Equal(Etcd{DatabaseSize: 42000000, Quota: 192 * mib}))

		forbidden := func(context.Context) ([]byte, error) { return nil, errors.New("forbidden") }
		space, err = etcdSpace(ctx, forbidden, 0)
		Expect(err).To(MatchError(ContainSubstring("forbidden")))
		Expect(space.SizeUnreported).To(BeFalse(), "an unreadable /metrics is an unknown size, not an unreported one")
	})

	It("writes sizes as people read them", func() {
		Expect(BytesText(16 * mib)).To(Equal("16Mi"))
		Expect(BytesText(DefaultQuota)).To(Equal("2Gi"))
		Expect(BytesText(1568536 << 10)).To(Equal("1.50Gi"))
		Expect(BytesText(24600 << 10)).To(Equal("24.0Mi"))
		Expect(BytesText(4328 << 10)).To(Equal("4.2Mi"))
		Expect(BytesText(300 << 10)).To(Equal("300Ki"))
	})

	It("charges a 16 KB object about what etcd measured (1.2x) and a small one its overhead", func() {
		Expect(WriteCost(16 << 10)).To(BeNumerically("~", 1.2*16*1024, 0.1*16*1024))
		Expect(WriteCost(300)).To(BeNumerically("<", 1024))
	})

	It("finds the storage size in the API server's /metrics, the largest of several etcd clusters", func() {
		metrics := []byte(`# HELP apiserver_storage_size_bytes [STABLE] Size of the storage database file physically allocated in bytes.
# TYPE apiserver_storage_size_bytes gauge
apiserver_storage_size_bytes{storage_cluster_id="etcd-0"} 1.2345e+08
apiserver_storage_size_bytes{storage_cluster_id="etcd-1"} 4096
apiserver_storage_size_bytes_other 1e+12
`)
		size, ok := parseStorageSize(metrics)
		Expect(ok).To(BeTrue())
		Expect(size).To(Equal(int64(123450000)))
		_, ok = parseStorageSize([]byte("apiserver_request_total 5\n"))
		Expect(ok).To(BeFalse())
	})

	It("lets writes go while the bytes not compacted yet fit the budget (a write always goes when none are)", func() {
		s := &Budget{budget: 2 * WriteCost(defaultObjectBytes)}
		for range 2 {
			_, ok := s.tryReserve(WriterPass)
			Expect(ok).To(BeTrue())
		}
		_, ok := s.tryReserve(WriterPass)
		Expect(ok).To(BeFalse())
		s = &Budget{budget: 1} // smaller than one write
		_, ok = s.tryReserve(WriterPass)
		Expect(ok).To(BeTrue())
		_, ok = s.tryReserve(WriterPass)
		Expect(ok).To(BeFalse())
	})

	It("charges a page's writes at least its largest sampled object", func() {
		// The first page starts among a client's small objects and ends
		// among large ones: charged at its first object, a hundred times the
		// ten large writes the budget holds would go; at the mean, twice.
		s := &Budget{budget: 10 * WriteCost(240<<10)}
		s.SampledPage(2<<10, 240<<10)
		for range 10 {
			_, ok := s.tryReserve(WriterPass)
			Expect(ok).To(BeTrue())
		}
		_, ok := s.tryReserve(WriterPass)
		Expect(ok).To(BeFalse(), "the eleventh large write passes the budget")
		// The next page's samples set its own floor; the mean stays.
		s.SampledPage(2<<10, 2<<10)
		Expect(s.cost()).To(Equal(WriteCost((2<<10 + 240<<10 + 2<<10 + 2<<10) / 4)))
	})

	It("charges what the sampled objects weigh", func() {
		s := &Budget{budget: 10 * WriteCost(300)}
		s.SampledPage(300)
		for range 10 {
			_, ok := s.tryReserve(WriterPass)
			Expect(ok).To(BeTrue())
		}
		_, ok := s.tryReserve(WriterPass)
		Expect(ok).To(BeFalse())
	})
	It("frees the oldest writes once etcd compacted past the last of them, and says which it waits for", func(ctx SpecContext) {
		defer func(poll, Settle time.Duration) { compactionPoll, compactionSettle = poll, Settle }(compactionPoll, compactionSettle)
		compactionPoll, compactionSettle = 10*time.Millisecond, time.Millisecond
		var compactedTo atomic.Int64
		var asked sync.Map
		var waits []string
		ended := 0
		s := &Budget{budget: 8 * WriteCost(defaultObjectBytes), compacted: func(_ context.Context, rv string) (bool, error) {
			asked.Store(rv, true)
			v, _ := strconv.ParseInt(rv, 10, 64)
			return compactedTo.Load() >= v, nil
		}}
		onWait, waited := func(rev string) { waits = append(waits, rev) }, func() { ended++ }
		// Eight writes fill the budget, in chunks of two.
		for rv := range 8 {
			chunk, err := s.Reserve(ctx, WriterPass, onWait, waited)
			Expect(err).NotTo(HaveOccurred())
			s.Done(chunk, strconv.Itoa(100+rv))
		}
		Expect(s.chunks).To(HaveLen(4))
		go func() {
			time.Sleep(50 * time.Millisecond)
			compactedTo.Store(100) // not past the first chunk's last write
			time.Sleep(50 * time.Millisecond)
			compactedTo.Store(103) // past the first two chunks
		}()
		_, err := s.Reserve(ctx, WriterPass, onWait, waited)
		Expect(err).NotTo(HaveOccurred())
		_, askedFirst := asked.Load("101")
		Expect(askedFirst).To(BeTrue(), "it asks about the oldest chunk's last write")
		Expect(s.outstanding).To(Equal(5*WriteCost(defaultObjectBytes)), "two chunks freed, one more write charged")
		Expect(waits).To(Equal([]string{"101"}), "one wait, for the oldest chunk's last write")
		Expect(ended).To(Equal(1))
	})

	It("never waits when the budget is off", func(ctx SpecContext) {
		s := &Budget{budget: -1}
		for range 1000 {
			_, err := s.Reserve(ctx, WriterPass, func(string) { Fail("a wait") }, nil)
			Expect(err).NotTo(HaveOccurred())
		}
	})
})
