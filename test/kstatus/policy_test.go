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
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/pizzaenv"
)

// heldByTest is a finalizer the suite puts on a policy to see it while it
// is being deleted.
const heldByTest = "kstatus.test.graduator.io/held"

// slowly migrates at 40 writes/s by 2 writers, slow enough to be seen
// part way.
var slowly = graduatorv1alpha1.MigrationSettings{Concurrency: 2, PageSize: 50, QPS: 40, SettleDelay: &metav1.Duration{Duration: time.Second}}

func installCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(envtestutil.DeleteCRD(ctx, k8sClient, crd.Name, time.Minute)).To(Succeed())
	})
	Expect(envtestutil.WaitServed(ctx, k8sClient, dyn, crd.Name)).To(Succeed())
}

func createWidgets(ctx context.Context, gvr schema.GroupVersionResource, n int) {
	GinkgoHelper()
	Expect(envtestutil.CreateObjects(ctx, dyn, gvr, n, 8, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(gvr, "default", fmt.Sprintf("widget-%04d", i), map[string]any{"color": "blue", "size": int64(i)})
	})).To(Succeed())
}

// createPolicy creates the policy and deletes it (with the test's
// finalizer, if any) when the spec ends.
func createPolicy(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		release(ctx, policy.Name)
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
	})
}

// update changes a policy's spec, retrying on conflicts.
func updateSpec(ctx context.Context, name string, change func(*graduatorv1alpha1.CRDVersionPolicySpec)) {
	GinkgoHelper()
	Eventually(func() error {
		var p graduatorv1alpha1.CRDVersionPolicy
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return err
		}
		change(&p.Spec)
		return k8sClient.Update(ctx, &p)
	}).WithContext(ctx).Should(Succeed())
}

// hold puts the test's finalizer on a policy and deletes it: it stays,
// being deleted, until release.
func holdAndDelete(ctx context.Context, name string) {
	GinkgoHelper()
	Eventually(func() error {
		var p graduatorv1alpha1.CRDVersionPolicy
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return err
		}
		controllerutil.AddFinalizer(&p, heldByTest)
		return k8sClient.Update(ctx, &p)
	}).WithContext(ctx).Should(Succeed())
	Expect(k8sClient.Delete(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
}

// release removes the test's finalizer, if the policy still exists.
func release(ctx context.Context, name string) {
	GinkgoHelper()
	Eventually(func() error {
		var p graduatorv1alpha1.CRDVersionPolicy
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !controllerutil.RemoveFinalizer(&p, heldByTest) {
			return nil
		}
		return k8sClient.Update(ctx, &p)
	}).WithContext(ctx).Should(Succeed())
}

var _ = Describe("A per-CRD policy, as kstatus reads it", func() {
	It("is InProgress before the operator saw it and while it migrates, Current once graduated, InProgress for a spec "+
		"not yet observed, Failed when paused, Terminating while a finalizer holds it", func(ctx SpecContext) {
		const group = "life.kstatus.graduator.io"
		crd := envtestutil.WidgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, envtestutil.WidgetResource(group, "v1"), 300)
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2", Migration: slowly},
		})

		By("no operator has looked at it yet: its status defaults to observedGeneration 0")
		obj, res := read(ctx, crd.Name)
		Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
		record(obj, "pending", progressing)

		stop := startOperator(nil)
		By("migrating")
		Eventually(func(g Gomega) {
			obj, res = read(ctx, crd.Name)
			rewritten, _, _ := unstructured.NestedInt64(obj.Object, "status", "migration", "rewritten")
			g.Expect(rewritten).To(BeNumerically(">", 0))
			g.Expect(obj.Object["status"]).To(HaveKeyWithValue("phase", string(graduatorv1alpha1.PhaseMigrating)))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
		Expect(condition(obj, graduatorv1alpha1.ConditionReconciling)).To(And(HaveKeyWithValue("status", "True"),
			HaveKeyWithValue("reason", string(graduatorv1alpha1.PhaseMigrating))))
		record(obj, "migrating", progressing)

		By("graduated")
		obj = reads(ctx, crd.Name, status.CurrentStatus, 2*time.Minute)
		Expect(condition(obj, graduatorv1alpha1.ConditionReady)).To(HaveKeyWithValue("status", "True"))
		record(obj, "graduated", healthy)

		By("a spec change the operator has not observed yet")
		stop()
		updateSpec(ctx, crd.Name, func(s *graduatorv1alpha1.CRDVersionPolicySpec) { s.Migration.PageSize = 100 })
		obj, res = read(ctx, crd.Name)
		Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
		Expect(res.Message).To(ContainSubstring("observed generation"))
		record(obj, "generation-not-observed", progressing)
		startOperator(nil)
		reads(ctx, crd.Name, status.CurrentStatus, time.Minute)

		By("paused: it waits for a person")
		updateSpec(ctx, crd.Name, func(s *graduatorv1alpha1.CRDVersionPolicySpec) { s.Paused = true })
		obj = reads(ctx, crd.Name, status.FailedStatus, time.Minute)
		expectStalledAsReady(obj, graduation.ReasonPaused)
		record(obj, "paused", suspended)

		By("being deleted")
		holdAndDelete(ctx, crd.Name)
		obj = reads(ctx, crd.Name, status.TerminatingStatus, 10*time.Second)
		record(obj, "terminating", progressing)
		release(ctx, crd.Name)
	})

	// Each permanent stall: the graduation cannot move on until a person
	// changes the policy, the CRD or the manifest; kstatus says Failed with
	// the reason, so a waiting GitOps tool fails instead of timing out.
	DescribeTable("is Failed, with Stalled saying what Ready says, when a person must act",
		func(ctx SpecContext, crd *apiextensionsv1.CustomResourceDefinition, name string, spec graduatorv1alpha1.CRDVersionPolicySpec,
			reason, file, health string) {
			if crd != nil {
				installCRD(ctx, crd)
			}
			startOperator(nil)
			createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
			// Recorded as soon as the operator says why in Ready, before
			// kstatus is asked: a policy that breaks the convention becomes
			// a case the health check's tests fail on too (-update).
			obj := readyBecause(ctx, name, reason)
			record(obj, file, health)
			expectFailed(obj)
			expectStalledAsReady(obj, reason)
		},
		Entry("CRDNotFound", nil, "widgets.missing.kstatus.graduator.io",
			graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"}, graduation.ReasonCRDNotFound, "crd-not-found", degraded),
		Entry("UnknownVersion", envtestutil.WidgetCRD("unknown.kstatus.graduator.io", "v1", "v2"), "widgets.unknown.kstatus.graduator.io",
			graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v3"}, graduation.ReasonUnknownVersion, "unknown-version", degraded),
		Entry("VersionNotServed", notServed(envtestutil.WidgetCRD("unserved.kstatus.graduator.io", "v1", "v2"), "v2"),
			"widgets.unserved.kstatus.graduator.io",
			graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"}, graduation.ReasonVersionNotServed, "version-not-served", degraded),
		Entry("ConversionNotConfigured", otherSchema(envtestutil.WidgetCRD("noconversion.kstatus.graduator.io", "v1", "v2"), "v2"),
			"widgets.noconversion.kstatus.graduator.io",
			graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2"}, graduation.ReasonConversionNotConfigured, "conversion-not-configured", degraded),
		Entry("StatusSubresourceMissing", envtestutil.WidgetCRD("nostatus.kstatus.graduator.io", "v1", "v2"), "widgets.nostatus.kstatus.graduator.io",
			graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2", Migration: graduatorv1alpha1.MigrationSettings{WriteTo: graduatorv1alpha1.WriteToStatus}},
			graduation.ReasonStatusSubresourceMissing, "status-subresource-missing", degraded),
		// GitOps mode: the operator's part is done, the next step is a
		// change of the CRD manifest in Git. Argo CD shows it Suspended
		// (waiting for you, nothing is wrong), kstatus Failed (it has no
		// such state, and waiting would never end).
		Entry("AwaitingManifestChange", envtestutil.WidgetCRD("manifest.kstatus.graduator.io", "v2", "v1"), "widgets.manifest.kstatus.graduator.io",
			graduatorv1alpha1.CRDVersionPolicySpec{Unserve: []graduatorv1alpha1.UnservedVersion{{Version: "v1"}}},
			graduation.ReasonAwaitingManifestChange, "awaiting-manifest-change", suspended),
	)

	It("is Failed while the operator may not write the objects (Forbidden), and Current once the rule is granted", func(ctx SpecContext) {
		const group = "forbidden.kstatus.graduator.io"
		crd := envtestutil.WidgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, envtestutil.WidgetResource(group, "v1"), 20)
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "graduator-kstatus-forbidden"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"graduator.io"}, Resources: []string{"crdversionpolicies"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"graduator.io"}, Resources: []string{"crdversionpolicies/status"}, Verbs: []string{"get", "patch", "update"}},
				{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions", "customresourcedefinitions/status"},
					Verbs: []string{"get", "list", "watch", "patch", "update"}},
				{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
				{APIGroups: []string{group}, Resources: []string{"widgets"}, Verbs: []string{"get", "list"}},
			},
		}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		DeferCleanup(k8sClient.Delete, role)
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: role.Name}},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(k8sClient.Delete, binding)
		user, err := testEnv.AddUser(envtest.User{Name: role.Name}, nil)
		Expect(err).NotTo(HaveOccurred())
		startOperator(user.Config())
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v2", Migration: slowly},
		})
		obj := readyBecause(ctx, crd.Name, graduation.ReasonForbidden)
		record(obj, "forbidden", degraded)
		expectFailed(obj)
		expectStalledAsReady(obj, graduation.ReasonForbidden)

		By("granting patch: the operator looks again by itself (backing off) and the stall clears")
		Eventually(func() error {
			var r rbacv1.ClusterRole
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(role), &r); err != nil {
				return err
			}
			r.Rules[len(r.Rules)-1].Verbs = []string{"get", "list", "patch"}
			return k8sClient.Update(ctx, &r)
		}).WithContext(ctx).Should(Succeed())
		reads(ctx, crd.Name, status.CurrentStatus, 3*time.Minute)
	})

	It("is InProgress, not Failed, while the conversion webhook is down (retried by itself), and Current once it is back",
		func(ctx SpecContext) {
			webhook, err := pizzaenv.StartWebhook(ctx)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(webhook.Stop)
			stage, err := pizzaenv.Stage(2) // v1alpha1 stored, v1beta1 served through the webhook
			Expect(err).NotTo(HaveOccurred())
			webhook.PointConversionAt(stage)
			Expect(k8sClient.Create(ctx, stage)).To(Succeed())
			DeferCleanup(func(ctx context.Context) {
				Expect(envtestutil.DeleteCRD(ctx, k8sClient, stage.Name, time.Minute)).To(Succeed())
			})
			Expect(pizzaenv.WaitServed(ctx, k8sClient, dyn, stage.Name)).To(Succeed())
			for i := range 300 {
				Expect(k8sClient.Create(ctx, pizzaenv.SampleV1alpha1(i))).To(Succeed())
			}
			startOperator(nil)
			createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: stage.Name},
				Spec:       graduatorv1alpha1.CRDVersionPolicySpec{StorageVersion: "v1beta1", Migration: slowly},
			})
			Eventually(func() int64 {
				obj, _ := read(ctx, stage.Name)
				rewritten, _, _ := unstructured.NestedInt64(obj.Object, "status", "migration", "rewritten")
				return rewritten
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", 50))

			By("stopping the webhook mid-run")
			webhook.Stop()
			var obj *unstructured.Unstructured
			Eventually(func(g Gomega) {
				obj, _ = read(ctx, stage.Name)
				g.Expect(condition(obj, graduatorv1alpha1.ConditionReady)).To(HaveKeyWithValue("reason", graduation.ReasonConversionFailed))
			}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
			res, err := status.Compute(obj)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(status.InProgressStatus), res.Message)
			Expect(condition(obj, graduatorv1alpha1.ConditionStalled)).To(HaveKeyWithValue("status", "False"))
			Expect(condition(obj, graduatorv1alpha1.ConditionReconciling)).To(And(HaveKeyWithValue("status", "True"),
				HaveKeyWithValue("reason", string(graduatorv1alpha1.PhaseMigrating))))
			record(obj, "transient-stall", progressing)

			By("starting the webhook again")
			Expect(webhook.Start(ctx)).To(Succeed())
			reads(ctx, stage.Name, status.CurrentStatus, 3*time.Minute)
		})
})

// readyBecause waits until the policy's Ready condition is False with the
// reason, and returns the policy.
func readyBecause(ctx context.Context, name, reason string) *unstructured.Unstructured {
	GinkgoHelper()
	var obj *unstructured.Unstructured
	Eventually(func(g Gomega) {
		obj, _ = read(ctx, name)
		g.Expect(condition(obj, graduatorv1alpha1.ConditionReady)).To(And(HaveKeyWithValue("status", "False"),
			HaveKeyWithValue("reason", reason)), "conditions: %v", conditionsOf(obj))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	return obj
}

// expectFailed checks that kstatus reads the policy as Failed.
func expectFailed(obj *unstructured.Unstructured) {
	GinkgoHelper()
	res, err := status.Compute(obj)
	Expect(err).NotTo(HaveOccurred())
	Expect(res.Status).To(Equal(status.FailedStatus), "kstatus says %q; conditions: %v", res.Message, conditionsOf(obj))
}

// notServed returns crd with version not served.
func notServed(crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.CustomResourceDefinition {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			crd.Spec.Versions[i].Served = false
		}
	}
	return crd
}

// otherSchema gives version a schema of its own (one more field), so that
// storing it needs a conversion webhook the CRD does not have.
func otherSchema(crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.CustomResourceDefinition {
	for i := range crd.Spec.Versions {
		if v := &crd.Spec.Versions[i]; v.Name == version {
			v.Schema = v.Schema.DeepCopy()
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			spec.Properties["flavour"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			v.Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
	}
	return crd
}
