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
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memoryStore is a Store with the API server's compare-and-swap: a save
// over a version not the last answers a conflict.
type memoryStore struct {
	mu      sync.Mutex
	sh      Shared
	version int
}

func (m *memoryStore) Load(context.Context) (Shared, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.version == 0 {
		return Shared{}, "", nil
	}
	return m.sh, strconv.Itoa(m.version), nil
}

func (m *memoryStore) Save(_ context.Context, sh Shared, version string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	current := ""
	if m.version > 0 {
		current = strconv.Itoa(m.version)
	}
	if version != current {
		return apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, LeaseName, nil)
	}
	m.sh = sh
	m.version++
	return nil
}

var _ = Describe("one budget for every writer to an etcd (Pool, Shared)", func() {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	fresh := now.Add(-time.Second)
	dead := now.Add(-2 * PartTTL)

	DescribeTable("shareOf: the part a process may hold",
		func(sh Shared, own Part, want int64, reason string) {
			next, share, why := shareOf(sh, "me", own, now)
			Expect(share).To(Equal(want), "share %s", BytesText(share))
			Expect(why).To(ContainSubstring(reason))
			var reserved int64
			for _, p := range next.Writers {
				reserved += max(p.Reserved, p.Outstanding)
			}
			Expect(reserved+next.Chain.Outstanding).To(BeNumerically("<=", max(sh.Budget, own.Outstanding+sh.others("me"))),
				"the parts never add up to more than the budget")
			Expect(next.Writers["me"].Renewed).To(Equal(now))
		},
		Entry("alone: the whole budget",
			Shared{Budget: 30 * mib}, Part{}, 30*mib, ""),
		Entry("two processes: half each",
			Shared{Budget: 30 * mib, Writers: map[string]Part{"other": {Reserved: 15 * mib, Renewed: fresh}}}, Part{}, 15*mib, "shared by 2 processes"),
		Entry("three processes started together: a third each",
			Shared{Budget: 30 * mib, Writers: map[string]Part{"a": {Reserved: 10 * mib, Renewed: fresh}, "b": {Reserved: 10 * mib, Renewed: fresh}}}, Part{}, 10*mib, "shared by 3 processes"),
		Entry("the other still holds the whole budget: nothing until it gives back",
			Shared{Budget: 30 * mib, Writers: map[string]Part{"other": {Reserved: 30 * mib, Outstanding: 30 * mib, Renewed: fresh}}}, Part{}, int64(0), "the others hold 30Mi"),
		Entry("the first holds more than its half: it keeps what it holds, and writes no more",
			Shared{Budget: 30 * mib, Writers: map[string]Part{"me": {Reserved: 30 * mib, Outstanding: 20 * mib, Renewed: fresh}, "other": {Renewed: fresh}}}, Part{Outstanding: 20 * mib}, 15*mib, "shared by 2 processes"),
		Entry("a process that died: its part expires, its bytes stay charged until compacted",
			Shared{Budget: 30 * mib, Writers: map[string]Part{"dead": {Reserved: 15 * mib, Outstanding: 12 * mib, Revision: 900, Renewed: dead}}}, Part{}, 18*mib, ""),
	)

	It("expire hands a dead writer's bytes on with their revision", func() {
		sh := Shared{Budget: 30 * mib, Writers: map[string]Part{
			"dead": {Reserved: 15 * mib, Outstanding: 12 * mib, Revision: 900, Renewed: dead},
			"live": {Reserved: 15 * mib, Outstanding: 3 * mib, Revision: 950, Renewed: fresh}}}
		Expect(sh.expire("me", now)).To(Equal(1))
		Expect(sh.Writers).To(HaveKey("live"))
		Expect(sh.Chain).To(Equal(Ledger{Peak: 12 * mib, Outstanding: 12 * mib, Revision: 900}))
	})

	compactedBelow := func(rev *uint64) func(context.Context, string) (bool, error) {
		return func(_ context.Context, v string) (bool, error) {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n < *rev, nil
		}
	}
	fixedRule := func(budget int64) rule {
		return func(prev Ledger) (int64, string, int64) { return budget, "rule", prev.InUse }
	}
	member := func(p *Pool, budget int64, compacted func(context.Context, string) (bool, error)) *Budget {
		s := &Budget{compacted: compacted, pool: p}
		var prev Ledger
		s.budget, _, prev = p.join(context.Background(), fixedRule(budget), Ledger{})
		s.ledger.InUse = prev.InUse
		s.inherit(prev)
		return s
	}
	fill := func(s *Budget, rev *uint64) int64 {
		var n int64
		for {
			c, ok := s.tryReserve(WriterPass)
			if !ok {
				return n
			}
			*rev++
			s.Done(c, strconv.FormatUint(*rev, 10))
			n += s.cost()
		}
	}

	It("holds every writer of a process under one budget, and hands what they left to the next", func() {
		rev := uint64(100)
		compacted := compactedBelow(new(uint64))
		p := NewPool("process", nil)
		a, b := member(p, 8*mib, compacted), member(p, 99*mib, compacted)
		Expect(b.Current()).To(Equal(8*mib), "the second writer takes the budget the first set")
		held := fill(a, &rev) + fill(b, &rev)
		Expect(held).To(BeNumerically("<=", 8*mib+WriteCost(defaultObjectBytes)),
			"two writers at once hold one budget (and one write of the second, which goes when it holds nothing)")
		a.Leave(context.Background())
		b.Leave(context.Background())
		next := member(p, 99*mib, compacted)
		Expect(next.Current()).To(Equal(int64(99*mib)), "alone again, the rule sets the budget")
		Expect(next.Ledger().Outstanding).To(Equal(held), "the writes not compacted yet stay charged to the next writer")
	})

	It("splits an etcd's budget between processes through the ledger in the cluster, and the next process takes over a dead one's bytes", func() {
		store := &memoryStore{}
		var compactedTo uint64
		compacted := compactedBelow(&compactedTo)
		rev := uint64(100)
		one, two := NewPool("one", store), NewPool("two", store)
		first := member(one, 30*mib, compacted)
		second := member(two, 99*mib, compacted)
		Expect(second.Current()).To(Equal(int64(30*mib)), "the second process takes the etcd's budget, not one of its own from a file the first grew")
		one.renew(context.Background(), true)
		two.renew(context.Background(), true)
		Expect(one.limit()).To(Equal(int64(15 * mib)))
		Expect(two.limit()).To(Equal(int64(15 * mib)))
		held := fill(first, &rev) + fill(second, &rev)
		Expect(held).To(BeNumerically("<=", 30*mib+2*WriteCost(defaultObjectBytes)), "together they hold one budget")

		one.renew(context.Background(), true) // its last renewal
		// The first dies: its part expires, and the second takes over its
		// bytes until etcd compacted past them.
		DeferCleanup(func(ttl time.Duration) { PartTTL = ttl }, PartTTL)
		PartTTL = 0
		two.renew(context.Background(), true)
		Expect(two.limit()).To(Equal(int64(30*mib)), "alone again")
		Expect(two.held()).To(Equal(first.outstanding+second.outstanding), "the dead process's bytes not compacted yet stay charged")
		compactedTo = rev + 1
		second.release(context.Background(), true)
		Expect(two.held()).To(BeZero(), "compacted, they are free")
		second.Leave(context.Background())
		Expect(store.sh.Writers).To(BeEmpty())
	})
})

var _ = DescribeTable("outlook: how long the rest takes at the pace compactions free the writes",
	func(remaining, freed int64, elapsed time.Duration, shared bool, want string) {
		Expect(outlook(remaining, freed, elapsed, shared)).To(Equal(want))
	},
	Entry("no compaction freed any yet: nothing to tell", int64(10*mib), int64(0), time.Minute, false, ""),
	Entry("nothing left", int64(0), int64(10*mib), time.Minute, false, ""),
	Entry("alone: 6Mi a minute, 30Mi left",
		int64(30*mib), int64(12*mib), 2*time.Minute, false,
		"; compactions free this run's writes at about 6Mi a minute: the 30Mi left take about 5m0s more. To go faster, raise etcd's quota (and tell it), or defragment etcd (etcdctl defrag) to give the pages compactions freed back"),
	Entry("shared: says the others hold their part",
		int64(3*mib), int64(6*mib), time.Minute, true,
		"; compactions free this run's writes at about 6Mi a minute and the other writers to this etcd hold their part of the budget: the 3Mi left take about 30s more. To go faster, raise etcd's quota (and tell it), or defragment etcd (etcdctl defrag) to give the pages compactions freed back"),
)
