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

package graduation_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

var _ = Describe("a completed run carried across one edit of the CRD", func() {
	// The CRD is at generation 5 and stores v1beta1; it was created an hour ago.
	current := func() *apiextensionsv1.CustomResourceDefinition {
		c := crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"}, ver{name: "v1", flags: "s"})
		c.CreationTimestamp = *ago(time.Hour)
		return c
	}
	completed := func(change func(*graduatorv1alpha1.MigrationStatus)) *graduatorv1alpha1.MigrationStatus {
		r := &graduatorv1alpha1.MigrationStatus{StorageVersion: "v1beta1", CRDGeneration: 4, Listed: 10, Rewritten: 10,
			StartedAt: ago(time.Minute), CompletedAt: ago(30 * time.Second)}
		if change != nil {
			change(r)
		}
		return r
	}

	DescribeTable("CompletedRunCarriesOver and CarryRun",
		func(run *graduatorv1alpha1.MigrationStatus, c *apiextensionsv1.CustomResourceDefinition, carries bool) {
			Expect(graduation.CompletedRunCarriesOver(run, c)).To(Equal(carries))
			if run == nil {
				return
			}
			before := run.CRDGeneration
			graduation.CarryRun(run, c)
			if carries {
				Expect(run.CRDGeneration).To(Equal(c.Generation), "carried to the CRD's generation")
			} else {
				Expect(run.CRDGeneration).To(Equal(before), "left alone")
			}
		},
		Entry("one edit that left the storage version alone (a version added)", completed(nil), current(), true),
		Entry("no run", nil, current(), false),
		Entry("a run not completed (the driver's nextRun keeps its checkpoint instead)",
			completed(func(r *graduatorv1alpha1.MigrationStatus) { r.CompletedAt = nil }), current(), false),
		Entry("a run of the CRD's own generation needs no carrying",
			completed(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration = 5 }), current(), false),
		Entry("two edits: they can move the storage version and put it back",
			completed(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration = 3 }), current(), false),
		Entry("the CRD stores another version than the run wrote",
			completed(func(r *graduatorv1alpha1.MigrationStatus) { r.StorageVersion = "v1alpha1" }), current(), false),
		Entry("the CRD was created again since the run started", completed(nil), func() *apiextensionsv1.CustomResourceDefinition {
			c := current()
			c.CreationTimestamp = *ago(10 * time.Second)
			return c
		}(), false),
		Entry("a run without a start time", completed(func(r *graduatorv1alpha1.MigrationStatus) { r.StartedAt = nil }), current(), false),
	)

	It("carries a run once per edit: a second edit after the carry carries again from there", func() {
		run, c := completed(nil), current()
		graduation.CarryRun(run, c)
		c.Generation = 6
		Expect(graduation.CompletedRunCarriesOver(run, c)).To(BeTrue())
		c.Generation = 7
		Expect(graduation.CompletedRunCarriesOver(run, c)).To(BeFalse(), "two edits since the carry")
	})
})
