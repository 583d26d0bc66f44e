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

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

var _ = Describe("A policy with bad input", func() {
	BeforeEach(func() {
		op := startOperator()
		DeferCleanup(op.stop)
	})

	It("for a CRD that does not exist is Ready=False with reason CRDNotFound", func(ctx SpecContext) {
		const name = "gadgets.missing.test.graduator.io"
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"},
		})
		Eventually(policyCondition(ctx, name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonCRDNotFound),
				HaveField("Message", ContainSubstring(name+" does not exist"))))
		Expect(getPolicy(ctx, name).Status.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
	})

	It("naming a version the CRD does not have is Ready=False with reason UnknownVersion and changes nothing", func(ctx SpecContext) {
		crd := widgetCRD("unknown.test.graduator.io", "v1", "v2")
		installCRD(ctx, crd)
		before := getCRD(ctx, crd.Name)

		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v3",
				Unserve:        []graduatorv1alpha1.UnservedVersion{{Version: "v1"}},
			},
		})
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonUnknownVersion),
				HaveField("Message", ContainSubstring(`"v3" is not a version of CustomResourceDefinition `+crd.Name))))
		Consistently(func() string { return getCRD(ctx, crd.Name).ResourceVersion }).WithTimeout(3*time.Second).
			Should(Equal(before.ResourceVersion), "the CRD is not written")
	})
})
