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

package kstatus_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
)

var _ = Describe("A fleet policy, as kstatus reads it", func() {
	It("is InProgress before the operator saw it and while its CRDs migrate, Current once they store only their storage version, "+
		"InProgress for a spec not yet observed, Failed while a CRD of it waits for a person, Terminating while a finalizer holds it",
		func(ctx SpecContext) {
			By("two CRDs whose manifests switched storage to v2 over objects stored as v1 (GitOps mode)")
			for _, group := range []string{"a.fleet.kstatus.graduator.io", "b.fleet.kstatus.graduator.io"} {
				crd := envtestutil.WidgetCRD(group, "v1", "v2")
				installCRD(ctx, crd)
				createWidgets(ctx, envtestutil.WidgetResource(group, "v1"), 150)
				Expect(envtestutil.SetStorageVersion(ctx, k8sClient, crd.Name, "v2")).To(Succeed())
			}
			const fleet = "kstatus-fleet"
			createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: fleet},
				Spec: graduatorv1alpha1.CRDVersionPolicySpec{
					Selector:  &graduatorv1alpha1.CRDSelector{Groups: []string{"*.fleet.kstatus.graduator.io"}},
					Migration: slowly,
				},
			})

			By("no operator has looked at it yet")
			obj, res := read(ctx, fleet)
			Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
			record(obj, "fleet-pending", progressing)

			stop := startOperator(nil)
			By("its CRDs migrating")
			Eventually(func(g Gomega) {
				obj, res = read(ctx, fleet)
				g.Expect(obj.Object["status"]).To(HaveKeyWithValue("phase", string(graduatorv1alpha1.PhaseMigrating)))
				g.Expect(condition(obj, graduatorv1alpha1.ConditionReconciling)).To(HaveKeyWithValue("status", "True"))
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
			Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
			record(obj, "fleet-migrating", progressing)

			By("every CRD graduated")
			obj = reads(ctx, fleet, status.CurrentStatus, 2*time.Minute)
			record(obj, "fleet-graduated", healthy)

			By("a spec change the operator has not observed yet")
			stop()
			updateSpec(ctx, fleet, func(s *graduatorv1alpha1.CRDVersionPolicySpec) {
				s.Migration.WriteTo = graduatorv1alpha1.WriteToStatus // the CRDs have no status subresource
			})
			obj, res = read(ctx, fleet)
			Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
			record(obj, "fleet-generation-not-observed", progressing)
			startOperator(nil)
			reads(ctx, fleet, status.CurrentStatus, time.Minute) // nothing left to migrate: the goal holds

			By("a new CRD of the fleet that cannot be migrated as the fleet says (writeTo Status, no status subresource)")
			crd := envtestutil.WidgetCRD("c.fleet.kstatus.graduator.io", "v1", "v2")
			installCRD(ctx, crd)
			createWidgets(ctx, envtestutil.WidgetResource("c.fleet.kstatus.graduator.io", "v1"), 10)
			Expect(envtestutil.SetStorageVersion(ctx, k8sClient, crd.Name, "v2")).To(Succeed())
			obj = reads(ctx, fleet, status.FailedStatus, time.Minute)
			expectStalledAsReady(obj, graduation.ReasonStatusSubresourceMissing)
			Expect(condition(obj, graduatorv1alpha1.ConditionStalled)["message"]).To(ContainSubstring(crd.Name))
			record(obj, "fleet-stalled", degraded)

			By("fixed by the person: writeTo Object")
			updateSpec(ctx, fleet, func(s *graduatorv1alpha1.CRDVersionPolicySpec) { s.Migration.WriteTo = graduatorv1alpha1.WriteToObject })
			reads(ctx, fleet, status.CurrentStatus, 2*time.Minute)

			By("being deleted")
			holdAndDelete(ctx, fleet)
			obj = reads(ctx, fleet, status.TerminatingStatus, 10*time.Second)
			record(obj, "fleet-terminating", progressing)
			release(ctx, fleet)
		})
})
