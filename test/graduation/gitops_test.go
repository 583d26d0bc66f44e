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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

var _ = Describe("A policy in GitOps mode", func() {
	It("migrates and prunes when the manifest flips storage, and never writes the CRD's spec", func(ctx SpecContext) {
		op := startOperator()
		DeferCleanup(op.stop)

		const group = "gitops.test.graduator.io"
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
		createWidgets(ctx, v1, 60)
		Expect(storedAPIVersions(ctx, group, "widgets")).To(HaveLen(60))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(HaveEach(group+"/v1"), "etcd holds every widget as v1")

		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				Unserve: []graduatorv1alpha1.UnservedVersion{{Version: "v1"}},
				Migration: graduatorv1alpha1.MigrationSettings{
					PageSize: 25, SettleDelay: &metav1.Duration{Duration: time.Second},
				},
			},
		})
		By("advising, while the manifest still stores v1, to switch storage first")
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionVersionsRetired)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonAwaitingManifestChange),
				HaveField("Message", ContainSubstring("v1 is still the storage version"))))

		By("flipping storage to v2 in the CRD, as a Git change would")
		live := getCRD(ctx, crd.Name)
		live.Spec.Versions[0].Storage, live.Spec.Versions[1].Storage = false, true
		Expect(k8sClient.Update(ctx, live)).To(Succeed())
		flipped := getCRD(ctx, crd.Name)

		By("pruning storedVersions to [v2] after every object is stored as v2")
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(time.Minute).
			Should(Equal([]string{"v2"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(60), HaveEach(group+"/v2")),
			"etcd holds every widget as v2")
		policy := getPolicy(ctx, crd.Name)
		Expect(policy.Status.Migration).NotTo(BeNil())
		Expect(policy.Status.Migration.Failed).To(BeZero())
		Expect(policy.Status.Migration.Rewritten + policy.Status.Migration.Skipped).To(BeEquivalentTo(60))
		Expect(policy.Status.Migration.Sweep).To(HavePrefix("watch: "), "the catch-up sweep read nothing again")

		By("advising the next Git change instead of making it")
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionVersionsRetired)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonAwaitingManifestChange),
				HaveField("Message", ContainSubstring("v1 is no longer stored: mark it deprecated, then unserve it"))))
		after := getCRD(ctx, crd.Name)
		Expect(after.Generation).To(Equal(flipped.Generation), "the operator never changed the CRD's spec")
		Expect(after.Spec.Versions).To(Equal(flipped.Spec.Versions))

		By("reaching Ready once the manifest unserves v1")
		generation := after.Generation
		after.Spec.Versions[0].Served = false
		Expect(k8sClient.Update(ctx, after)).To(Succeed())
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
		var final apiextensionsv1.CustomResourceDefinition
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crd), &final)).To(Succeed())
		Expect(final.Generation).To(Equal(generation+1), "only the manifest's own change bumped the generation")
	})
})
