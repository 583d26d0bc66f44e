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
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

// kstatusWant is what a GitOps tool reads: which of Reconciling and Stalled
// is True (none when Ready is), and the reason it carries.
type kstatusWant struct {
	reconciling, stalled bool
	reason               string
}

var _ = Describe("kstatus conditions: Reconciling while a step is under way, Stalled when a person must act", func() {
	alpha := ver{name: "v1alpha1", flags: "sS"}
	alphaServed := ver{name: "v1alpha1", flags: "s"}
	beta := ver{name: "v1beta1", flags: "s"}
	betaStorage := ver{name: "v1beta1", flags: "sS"}
	migrating := graduatorv1alpha1.MigrationStatus{StorageVersion: "v1beta1", CRDGeneration: 5, Listed: 100, Rewritten: 40, StartedAt: ago(time.Minute)}
	inPhase := func(phase graduatorv1alpha1.Phase) policyOpt {
		return func(p *graduatorv1alpha1.CRDVersionPolicy) { p.Status.Phase = phase }
	}
	conversionDown := errors.New(`conversion webhook for restaurant.example.com/v1alpha1, Kind=Pizza failed: Post "https://pizza-webhook.default.svc:443/convert": connection refused`)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}, "", errors.New("no RBAC rule"))

	DescribeTable("Plan sets them beside Ready",
		func(c *apiextensionsv1.CustomResourceDefinition, p *graduatorv1alpha1.CRDVersionPolicy, failed *graduation.StepError, want kstatusWant) {
			step := graduation.Plan(graduation.Input{CRD: c, Policy: p, Now: now, StorageSettled: true, Failed: failed})
			ready := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionReady)
			reconciling := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionReconciling)
			stalled := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionStalled)
			Expect([]*metav1.Condition{ready, reconciling, stalled}).NotTo(ContainElement(BeNil()))
			Expect(reconciling.Status == metav1.ConditionTrue).To(Equal(want.reconciling), "Reconciling: %s: %s", reconciling.Reason, reconciling.Message)
			Expect(stalled.Status == metav1.ConditionTrue).To(Equal(want.stalled), "Stalled: %s: %s", stalled.Reason, stalled.Message)
			Expect(ready.Status == metav1.ConditionTrue).To(Equal(!want.reconciling && !want.stalled), "Ready: %s", ready.Message)
			switch {
			case want.stalled:
				Expect(stalled.Reason).To(Equal(want.reason))
				Expect(stalled.Reason).To(Equal(ready.Reason), "Stalled says what Ready says")
				Expect(stalled.Message).To(Equal(ready.Message))
			case want.reconciling:
				Expect(reconciling.Reason).To(Equal(want.reason))
				Expect(reconciling.Message).To(Equal(ready.Message))
			}
		},
		Entry("the preflight runs: Reconciling, reason Preflight",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"), nil,
			kstatusWant{reconciling: true, reason: "Preflight"}),
		Entry("objects are rewritten: Reconciling, reason Migrating",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(migrating)), nil,
			kstatusWant{reconciling: true, reason: "Migrating"}),
		Entry("a conversion webhook down mid-run is retried by itself: still Reconciling, not Stalled",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(migrating), inPhase(graduatorv1alpha1.PhaseMigrating)),
			&graduation.StepError{Step: "Migrate", Err: conversionDown},
			kstatusWant{reconciling: true, reason: "Migrating"}),
		Entry("the API server unavailable before any phase: Reconciling with the stall's reason",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"),
			&graduation.StepError{Step: "GetCRD", Err: apierrors.NewServiceUnavailable("etcd leader changed")},
			kstatusWant{reconciling: true, reason: graduation.ReasonAPIUnavailable}),
		Entry("graduated: neither", crd([]string{"v1beta1"}, alphaServed, betaStorage), policy("v1beta1"), nil,
			kstatusWant{}),

		Entry("paused: Stalled", crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1", paused), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonPaused}),
		Entry("a missing CRD: Stalled", nil, policy("v1beta1"), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonCRDNotFound}),
		Entry("an unknown version: Stalled", crd([]string{"v1alpha1"}, alpha, beta), policy("v2"), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonUnknownVersion}),
		Entry("a version not served: Stalled", crd([]string{"v1alpha1"}, alpha, ver{name: "v1beta1"}), policy("v1beta1"), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonVersionNotServed}),
		Entry("no conversion webhook: Stalled",
			func() *apiextensionsv1.CustomResourceDefinition {
				c := crd([]string{"v1alpha1"}, alpha, beta)
				c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
				return c
			}(), policy("v1beta1"), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonConversionNotConfigured}),
		Entry("writeTo Status without the subresource: Stalled", crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1", writeToStatus), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonStatusSubresourceMissing}),
		Entry("RBAC missing: Stalled, although the operator looks again with backoff",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), inPhase(graduatorv1alpha1.PhaseMigrating)),
			&graduation.StepError{Step: "Migrate", Err: forbidden},
			kstatusWant{stalled: true, reason: graduation.ReasonForbidden}),
		Entry("GitOps mode waiting for the next manifest change: Stalled",
			crd([]string{"v1beta1"}, alphaServed, betaStorage), policy("", unserve("v1alpha1", 0)), nil,
			kstatusWant{stalled: true, reason: graduation.ReasonAwaitingManifestChange}),
	)

	It("reads a lossy conversion as Stalled, with Ready's words", func() {
		conditions := []metav1.Condition{{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: graduation.ReasonConversionLossy, Message: "default/margherita does not round-trip through v1beta1"}}
		graduation.SetProgress(&conditions, graduatorv1alpha1.PhasePreflight)
		stalled := meta.FindStatusCondition(conditions, graduatorv1alpha1.ConditionStalled)
		Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		Expect(stalled.Message).To(Equal("default/margherita does not round-trip through v1beta1"))
		Expect(meta.IsStatusConditionFalse(conditions, graduatorv1alpha1.ConditionReconciling)).To(BeTrue())
	})
})
