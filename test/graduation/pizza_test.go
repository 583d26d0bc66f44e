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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduationtest"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/gitops"
	"github.com/graduator/graduator/test/pizzaenv"
)

const (
	pizzaGroup = "restaurant.example.com"
	pizzaCRD   = "pizzas." + pizzaGroup
	pizzas     = 150
)

func pizzaResource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: pizzaGroup, Version: version, Resource: "pizzas"}
}

// The Pizza scenario is rehearsed with graduationtest, as a CRD author
// would: its stages, objects, snapshots and etcd reads are the package's;
// the graduation itself is the operator's, driven by policies.
var _ = Describe("The Pizza CRD driven by CRDVersionPolicies", Ordered, func() {
	var (
		webhook *pizzaenv.Webhook
		r       *graduationtest.Rehearsal
	)

	BeforeAll(func(ctx SpecContext) {
		r = graduationtest.New(GinkgoT(), testEnv, graduationtest.Options{
			Scheme: scheme,
			// A pizza created at v1alpha1 without a status reads back with
			// "status: {}" once the conversion to v1beta1 wrote it out.
			Ignore: []string{"/status"},
		})
		var err error
		webhook, err = pizzaenv.StartWebhook(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(webhook.Stop)
		op := startOperator()
		DeferCleanup(op.stop)
	})

	// applyStage applies a stage manifest the way Argo CD configured for
	// managed mode would: the operator's version flags are kept. It returns
	// the API server's refusal, or nil once every served version answers.
	applyStage := func(ctx SpecContext, n int) error {
		crd, err := pizzaenv.Stage(n)
		Expect(err).NotTo(HaveOccurred())
		webhook.PointConversionAt(crd)
		if err := gitops.Apply(ctx, k8sClient, crd); err != nil {
			return err
		}
		return graduationtest.WaitServed(ctx, k8sClient, dyn, crd.Name, graduationtest.DefaultTimeout)
	}

	// storedAs expects every pizza stored in etcd as version.
	storedAs := func(ctx SpecContext, version string) {
		GinkgoHelper()
		stored := r.Stored(ctx, pizzaCRD)
		Expect(stored.Objects).To(HaveLen(pizzas), stored.String())
		Expect(stored.NotAs(pizzaGroup+"/"+version)).To(BeEmpty(), stored.String())
	}

	It("walks stages 1 to 6 and removes v1alpha1, which the API server refuses without the operator", func(ctx SpecContext) {
		By("stage 1: v1alpha1 only, with pizzas created at v1alpha1")
		Expect(applyStage(ctx, 1)).To(Succeed())
		DeferCleanup(deleteCRD, pizzaCRD)
		for i := range pizzas {
			r.Create(ctx, pizzaenv.SampleV1alpha1(i))
		}
		storedAs(ctx, "v1alpha1")

		By("the API server refusing stage 6 while v1alpha1 is stored")
		err := applyStage(ctx, 6)
		// Kubernetes 1.30 says "must appear in spec.versions" (as the design
		// quotes); 1.37 says "missing from spec.versions".
		Expect(err).To(MatchError(MatchRegexp(
			`status\.storedVersions\[0\]: Invalid value: "v1alpha1": (must appear in|missing from) spec\.versions`)))

		By("stage 2: v1beta1 served through the conversion webhook")
		Expect(applyStage(ctx, 2)).To(Succeed())
		before := r.Snapshot(ctx, pizzaCRD) // at v1alpha1 and v1beta1
		Expect(before.Len()).To(Equal(pizzas))

		By("a policy storing v1beta1 and retiring v1alpha1 (stage 3, done by the operator)")
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: pizzaCRD},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v1beta1",
				Deprecate: []graduatorv1alpha1.DeprecatedVersion{{
					Version: "v1alpha1", Warning: "restaurant.example.com/v1alpha1 Pizza is deprecated; use v1beta1",
				}},
				Unserve:   []graduatorv1alpha1.UnservedVersion{{Version: "v1alpha1", After: &metav1.Duration{Duration: 3 * time.Second}}},
				Migration: graduatorv1alpha1.MigrationSettings{PageSize: 40, SettleDelay: &metav1.Duration{Duration: time.Second}},
			},
		})
		Eventually(func() []string { return getCRD(ctx, pizzaCRD).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v1beta1"}))
		storedAs(ctx, "v1beta1")
		r.Verify(ctx, before)

		By("deprecating v1alpha1, then unserving it after its grace period")
		Eventually(func(g Gomega) {
			crd := getCRD(ctx, pizzaCRD)
			g.Expect(crd.Spec.Versions).To(ContainElement(And(
				HaveField("Name", "v1alpha1"), HaveField("Deprecated", true), HaveField("Served", false),
				HaveField("DeprecationWarning", ptr.To("restaurant.example.com/v1alpha1 Pizza is deprecated; use v1beta1")))))
		}).WithTimeout(time.Minute).Should(Succeed())
		Eventually(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionReady)).WithTimeout(time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))

		By("removing managedFields entries of the unserved v1alpha1")
		list, err := dyn.Resource(pizzaResource("v1beta1")).Namespace("default").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(pizzas))
		for _, item := range list.Items {
			Expect(managedAPIVersions(&item)).NotTo(ContainElement(pizzaGroup+"/v1alpha1"), item.GetName())
		}

		By("stage 4: v1 added; the policy now stores v1 (stage 5, done by the operator)")
		Expect(applyStage(ctx, 4)).To(Succeed())
		policy := getPolicy(ctx, pizzaCRD)
		policy.Spec.StorageVersion = "v1"
		Expect(k8sClient.Update(ctx, policy)).To(Succeed())
		Eventually(func() []string { return getCRD(ctx, pizzaCRD).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v1"}))
		storedAs(ctx, "v1")
		r.Verify(ctx, before) // at v1beta1: v1alpha1 is no longer served
		Eventually(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionReady)).WithTimeout(time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))

		By("stage 6: v1alpha1 removed from the CRD, accepted now")
		Expect(applyStage(ctx, 6)).To(Succeed())
		crd := getCRD(ctx, pizzaCRD)
		Expect(crd.Spec.Versions).NotTo(ContainElement(HaveField("Name", "v1alpha1")))
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		r.Verify(ctx, before)
		Eventually(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionReady)).WithTimeout(time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
	})

	It("is blocked by a preflight that cannot convert while the webhook is down, and changes nothing", func(ctx SpecContext) {
		Expect(applyStage(ctx, 1)).To(Succeed())
		DeferCleanup(deleteCRD, pizzaCRD)
		for i := range 5 {
			r.Create(ctx, pizzaenv.SampleV1alpha1(i))
		}
		Expect(applyStage(ctx, 2)).To(Succeed())
		webhook.Stop()
		DeferCleanup(func(ctx SpecContext) { Expect(webhook.Start(ctx)).To(Succeed()) })
		before := getCRD(ctx, pizzaCRD)

		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: pizzaCRD},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v1beta1"},
		})
		Eventually(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(haveStatusReason(metav1.ConditionFalse, graduation.ReasonPreflightFailed))
		Expect(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionPreflightPassed)()).
			To(And(haveStatusReason(metav1.ConditionFalse, "ConversionFailed"),
				HaveField("Message", ContainSubstring("conversion webhook"))))
		Expect(getPolicy(ctx, pizzaCRD).Status.Phase).To(Equal(graduatorv1alpha1.PhaseBlocked))
		after := getCRD(ctx, pizzaCRD)
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "the CRD is not written")
		Expect(graduation.StorageVersion(after)).To(Equal("v1alpha1"))
	})
})

// managedAPIVersions lists the apiVersions of an object's managedFields.
func managedAPIVersions(obj *unstructured.Unstructured) []string {
	var out []string
	for _, mf := range obj.GetManagedFields() {
		out = append(out, mf.APIVersion)
	}
	return out
}
