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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

var _ = Describe("PlanFleet", func() {
	stalledPolicy := func(name, reason, message string) *graduatorv1alpha1.CRDVersionPolicy {
		p := &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Status.Conditions = []metav1.Condition{{Type: graduatorv1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
			Reason: reason, Message: message}}
		return p
	}
	DescribeTable("the selector policy's phase and conditions",
		func(in graduation.FleetInput, phase graduatorv1alpha1.Phase, ready metav1.ConditionStatus, reason string,
			reconciling, stalled metav1.ConditionStatus, message string) {
			gotPhase, conditions := graduation.PlanFleet(in)
			Expect(gotPhase).To(Equal(phase))
			r := meta.FindStatusCondition(conditions, graduatorv1alpha1.ConditionReady)
			Expect(r).NotTo(BeNil())
			Expect(r.Status).To(Equal(ready))
			Expect(r.Reason).To(Equal(reason))
			Expect(r.Message).To(ContainSubstring(message))
			Expect(meta.FindStatusCondition(conditions, graduatorv1alpha1.ConditionReconciling)).To(HaveField("Status", reconciling))
			Expect(meta.FindStatusCondition(conditions, graduatorv1alpha1.ConditionStalled)).To(HaveField("Status", stalled))
		},
		Entry("every selected CRD stores only its storage version",
			graduation.FleetInput{Selected: 3}, graduatorv1alpha1.PhaseGraduated, metav1.ConditionTrue, graduation.ReasonGraduated,
			metav1.ConditionFalse, metav1.ConditionFalse, "every one of the 3 selected CRDs stores only its storage version"),
		Entry("some still store older versions, named in order",
			graduation.FleetInput{Selected: 3, Stale: []string{"b.example.com", "a.example.com"}}, graduatorv1alpha1.PhaseMigrating,
			metav1.ConditionFalse, graduation.ReasonInProgress, metav1.ConditionTrue, metav1.ConditionFalse,
			"2 of 3 selected CRDs still store older versions: a.example.com, b.example.com"),
		Entry("a blocked member makes the fleet Blocked, still reconciling while none is Stalled",
			graduation.FleetInput{Selected: 3, Stale: []string{"a.example.com"}, Blocked: true}, graduatorv1alpha1.PhaseBlocked,
			metav1.ConditionFalse, graduation.ReasonInProgress, metav1.ConditionTrue, metav1.ConditionFalse, "1 of 3"),
		Entry("a stalled member gives its reason and words, and how many more",
			graduation.FleetInput{Selected: 4, Stale: []string{"a.example.com", "b.example.com"}, Blocked: true,
				Stalled: []*graduatorv1alpha1.CRDVersionPolicy{
					stalledPolicy("b.example.com", graduation.ReasonConversionFailed, "the webhook is down"),
					stalledPolicy("a.example.com", graduation.ReasonForbidden, "add the rule"),
				}},
			graduatorv1alpha1.PhaseBlocked, metav1.ConditionFalse, graduation.ReasonForbidden, metav1.ConditionFalse, metav1.ConditionTrue,
			"2 of 4 selected CRDs cannot go on until a person acts; a.example.com: add the rule; also b.example.com (see their policies)"),
	)
})
