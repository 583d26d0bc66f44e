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
	"errors"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMigration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "migration (pure parts)")
}

var _ = Describe("the checkpoint", func() {
	DescribeTable("an object is skipped only when written after the checkpoint",
		func(rv, checkpoint string, newer bool) {
			got, _ := isNewer(rv, checkpoint)
			Expect(got).To(Equal(newer))
		},
		Entry("newer", "1001", "1000", true),
		Entry("older", "999", "1000", false),
		Entry("equal", "1000", "1000", false),
		Entry("longer numbers compare as numbers", "10000", "9999", true),
		Entry("no checkpoint yet", "5", "", false),
		Entry("an unparsable version is rewritten", "abc", "1000", false),
	)
})

var _ = Describe("Judge: what a refused write proves", func() {
	listed := ObjectVersion{UID: "u1", ResourceVersion: "900"}
	DescribeTable("an object is done only when proven so",
		func(current *ObjectVersion, want Outcome) {
			Expect(Judge(listed, current, "1000")).To(Equal(want))
		},
		Entry("deleted since the LIST: done", nil, Skipped),
		Entry("deleted and created again (new uid): done", &ObjectVersion{UID: "u2", ResourceVersion: "950"}, Skipped),
		Entry("written after the checkpoint: done", &ObjectVersion{UID: "u1", ResourceVersion: "1001"}, Skipped),
		Entry("written before the checkpoint, after the LIST: write again", &ObjectVersion{UID: "u1", ResourceVersion: "950"}, Retry),
		Entry("unchanged although the write said 404 (no status subresource): failed",
			&ObjectVersion{UID: "u1", ResourceVersion: "900"}, Failed),
	)
	It("never takes an unparsable resourceVersion as newer", func() {
		Expect(Judge(listed, &ObjectVersion{UID: "u1", ResourceVersion: "900"}, "not-a-number")).To(Equal(Failed))
	})
})

var _ = Describe("StopsRun: errors that are the cluster's, not the object's", func() {
	gr := schema.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}
	DescribeTable("which write errors stop the run instead of failing one object",
		func(err error, stops bool) { Expect(StopsRun(err)).To(Equal(stops)) },
		Entry("a conversion webhook that does not answer", apierrors.NewInternalError(errors.New(
			`conversion webhook for restaurant.example.com/v1alpha1, Kind=Pizza failed: Post "https://127.0.0.1:1/convert": connection refused`)), true),
		Entry("an API server still unavailable after the retries", apierrors.NewServiceUnavailable("later"), true),
		Entry("throttled beyond the retries", apierrors.NewTooManyRequests("slow down", 2), true),
		Entry("RBAC says no", apierrors.NewForbidden(gr, "margherita",
			errors.New(`User "graduator" cannot patch resource "pizzas" in API group "restaurant.example.com"`)), true),
		Entry("not authenticated", apierrors.NewUnauthorized("who are you"), true),
		Entry("an admission webhook rejects the object", apierrors.NewForbidden(gr, "margherita",
			errors.New(`admission webhook "deny.example.com" denied the request: frozen`)), false),
		Entry("validation rejects the object", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Pizza"}, "margherita", nil), false),
		Entry("a conflict (judged by a read, never final)", apierrors.NewConflict(gr, "margherita", errors.New("changed")), false),
	)
})

var _ = Describe("NextLimit: the adaptive limit on writes in flight", func() {
	base := 10 * time.Millisecond
	w := func(count int, avg time.Duration, throttled bool) window {
		return window{count: count, total: time.Duration(count) * avg, throttled: throttled}
	}
	DescribeTable("grows while latency stays near its low-load value, shrinks when it inflates, halves on throttling",
		func(limit float64, win window, want float64) {
			Expect(NextLimit(limit, base, win, 64)).To(BeNumerically("~", want, 0.001))
		},
		Entry("latency at the base: grow by a quarter", 8.0, w(8, base, false), 10.0),
		Entry("latency within twice the base: grow", 8.0, w(8, 19*time.Millisecond, false), 10.0),
		Entry("latency past twice the base: shrink by a tenth", 10.0, w(10, 25*time.Millisecond, false), 9.0),
		Entry("a 429, 5xx or timeout: halve", 10.0, w(10, base, true), 5.0),
		Entry("never above the bound (concurrency)", 60.0, w(60, base, false), 64.0),
		Entry("never below one writer", 1.0, w(1, base, true), 1.0),
		Entry("an empty window changes nothing", 6.0, window{}, 6.0),
	)

	It("averages a window over enough writes that a few lucky ones do not set the base", func() {
		l := newLimiter(64, false)
		for range 8 {
			l.Release(Signal{Latency: 2 * time.Millisecond}) // fast first writes: queues still empty
		}
		for range 56 {
			l.Release(Signal{Latency: 10 * time.Millisecond}) // the steady state
		}
		Expect(l.Limit()).To(BeNumerically(">", initialLimit),
			"10 ms writes are within twice a base of 8 ms (the first 32 writes); a base of 2 ms (the first 8) would shrink the limit")
	})

	It("holds every writer back for a Retry-After, and frees a slot on release", func(ctx SpecContext) {
		l := newLimiter(64, false)
		now := time.Now()
		l.now = func() time.Time { return now }
		Expect(l.Acquire(ctx)).To(Succeed())
		l.Release(Signal{Latency: base, Throttled: true, RetryAfter: time.Hour})
		Expect(l.Limit()).To(Equal(2), "halved from 4")
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		Expect(l.Acquire(short)).To(MatchError(context.DeadlineExceeded), "held back by Retry-After")
		now = now.Add(2 * time.Hour)
		Expect(l.Acquire(ctx)).To(Succeed())
		Expect(l.Acquire(ctx)).To(Succeed())
		blocked, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel2()
		Expect(l.Acquire(blocked)).To(HaveOccurred(), "both slots taken")
		l.Release(Signal{Latency: base})
		Expect(l.Acquire(ctx)).To(Succeed(), "a released slot is free again")
	})
})
