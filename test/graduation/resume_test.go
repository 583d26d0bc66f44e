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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

var _ = Describe("An operator restarted in the middle of a migration", func() {
	It("resumes from the continue token it saved, not from the start", func(ctx SpecContext) {
		const (
			group   = "resume.test.graduator.io"
			objects = 300
		)
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, objects)

		first := startOperator()
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v2",
				// Slow enough to stop it in the middle: 15 pages of 20 at 30 writes/s.
				Migration: graduatorv1alpha1.MigrationSettings{
					Concurrency: 1, PageSize: 20, QPS: 30, SettleDelay: &metav1.Duration{Duration: time.Second},
				},
			},
		})

		By("stopping the operator once it saved progress part of the way")
		Eventually(func(g Gomega) {
			run := getPolicy(ctx, crd.Name).Status.Migration
			g.Expect(run).NotTo(BeNil())
			g.Expect(run.ContinueToken).NotTo(BeEmpty())
			g.Expect(run.Listed).To(BeNumerically(">=", 60))
		}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
		first.stop()
		saved := getPolicy(ctx, crd.Name).Status.Migration.DeepCopy()
		Expect(saved.ContinueToken).NotTo(BeEmpty())
		Expect(saved.CompletedAt).To(BeNil(), "the first operator did not finish")
		Expect(saved.Listed).To(BeNumerically("<", objects))
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"), "nothing is pruned after a partial run")

		By("starting a new operator")
		second := startOperator()
		DeferCleanup(second.stop)
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))

		lists := second.requests.lists("widgets")
		Expect(lists).NotTo(BeEmpty())
		Expect(lists[0].continueToken).To(Equal(saved.ContinueToken),
			"the new operator's first LIST continues from the saved token")
		run := getPolicy(ctx, crd.Name).Status.Migration
		Expect(run.Listed).To(BeEquivalentTo(objects), "every object was listed exactly once over both runs")
		Expect(run.Failed).To(BeZero())
		Expect(run.StartedAt.Time).To(Equal(saved.StartedAt.Time), "it is the same run")
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v2")),
			"etcd holds every widget as v2")
	})
})
