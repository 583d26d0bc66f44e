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
	"errors"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/graduator/graduator/internal/limit"
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

var _ = Describe("judge: what a refused write proves", func() {
	listed := ObjectVersion{UID: "u1", ResourceVersion: "900"}
	DescribeTable("an object is done only when proven so",
		func(current *ObjectVersion, want fate) {
			Expect(judge(listed, current, "1000")).To(Equal(want))
		},
		Entry("deleted since the LIST: done", nil, skipped),
		Entry("deleted and created again (new uid): done", &ObjectVersion{UID: "u2", ResourceVersion: "950"}, skipped),
		Entry("written after the checkpoint: done", &ObjectVersion{UID: "u1", ResourceVersion: "1001"}, skipped),
		Entry("written before the checkpoint, after the LIST: write again", &ObjectVersion{UID: "u1", ResourceVersion: "950"}, writeAgain),
		Entry("unchanged although the write said 404 (no status subresource): failed",
			&ObjectVersion{UID: "u1", ResourceVersion: "900"}, failed),
	)
	It("never takes an unparsable resourceVersion as newer", func() {
		Expect(judge(listed, &ObjectVersion{UID: "u1", ResourceVersion: "900"}, "not-a-number")).To(Equal(failed))
	})
})

var _ = Describe("stopsRun: errors that are the cluster's, not the object's", func() {
	gr := schema.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}
	DescribeTable("which write errors stop the run instead of failing one object",
		func(err error, stops bool) { Expect(stopsRun(err)).To(Equal(stops)) },
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

var _ = Describe("the adaptive limit's public words", func() {
	DescribeTable("each of the rule's reasons reads as the public LimitReason of the same name",
		func(r limit.Reason, public LimitReason) { Expect(limitReason(r)).To(Equal(public)) },
		Entry(nil, limit.Probing, LimitProbing),
		Entry(nil, limit.Holding, LimitHolding),
		Entry(nil, limit.BackingOff, LimitBackingOff),
		Entry(nil, limit.Yielding, LimitYielding),
		Entry(nil, limit.Queueing, LimitQueueing),
		Entry(nil, limit.Pausing, LimitPausing),
		Entry(nil, limit.Fixed, LimitFixed),
	)
	DescribeTable("each Priority reaches the rule as its own, empty as Background",
		func(p Priority, want limit.Priority) { Expect(limitPriority(p)).To(Equal(want)) },
		Entry(nil, PriorityBackground, limit.Background),
		Entry(nil, PriorityFull, limit.Full),
		Entry(nil, Priority(""), limit.Background),
	)
})
