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
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/test/pizzaenv"
)

// Every stall says why: a run that cannot go on shows the reason in the
// policy's conditions within one retry, keeps what it did, and clears when
// the cause is gone.
var _ = Describe("A stalled graduation", func() {
	It("shows ConversionFailed while the conversion webhook is down, prunes nothing, and finishes when it is back", func(ctx SpecContext) {
		const objects = 600
		webhook, err := pizzaenv.StartWebhook(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(webhook.Stop)
		stage, err := pizzaenv.Stage(2) // v1alpha1 stored, v1beta1 served through the webhook
		Expect(err).NotTo(HaveOccurred())
		webhook.PointConversionAt(stage)
		Expect(k8sClient.Create(ctx, stage)).To(Succeed())
		DeferCleanup(deleteCRD, pizzaCRD)
		Expect(pizzaenv.WaitServed(ctx, k8sClient, dyn, pizzaCRD)).To(Succeed())
		for i := range objects {
			Expect(k8sClient.Create(ctx, pizzaenv.SampleV1alpha1(i))).To(Succeed())
		}

		op := startOperatorWith(operatorOptions{})
		DeferCleanup(op.stop)
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: pizzaCRD},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v1beta1",
				Migration: graduatorv1alpha1.MigrationSettings{
					Concurrency: 2, PageSize: 50, QPS: 60, SettleDelay: &metav1.Duration{Duration: time.Second},
				},
			},
		})
		Eventually(func() int64 {
			if run := getPolicy(ctx, pizzaCRD).Status.Migration; run != nil {
				return run.Rewritten
			}
			return 0
		}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", 100))

		By("stopping the webhook mid-run")
		webhook.Stop()
		Eventually(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonConversionFailed),
				HaveField("Message", And(ContainSubstring("conversion webhook"), ContainSubstring("retrying in")))))
		stalled := getPolicy(ctx, pizzaCRD)
		Expect(stalled.Status.Phase).To(Equal(graduatorv1alpha1.PhaseMigrating), "the phase stays what it was")
		Expect(stalled.Status.Retries).To(BeNumerically(">=", 1))
		Expect(stalled.Status.Migration.Rewritten).To(BeNumerically(">=", 100), "the progress is kept")
		Expect(conditionOf(stalled, graduatorv1alpha1.ConditionPreflightPassed).Status).To(Equal(metav1.ConditionTrue))
		Expect(getCRD(ctx, pizzaCRD).Status.StoredVersions).To(ContainElement("v1alpha1"), "nothing is pruned")
		Expect(storedAPIVersions(ctx, pizzaGroup, "pizzas")).To(ContainElement(pizzaGroup+"/v1alpha1"),
			"etcd still holds pizzas at v1alpha1")

		By("starting the webhook again")
		Expect(webhook.Start(ctx)).To(Succeed())
		Eventually(policyCondition(ctx, pizzaCRD, graduatorv1alpha1.ConditionReady)).WithTimeout(2 * time.Minute).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
		Expect(getPolicy(ctx, pizzaCRD).Status.Retries).To(BeZero())
		Expect(getCRD(ctx, pizzaCRD).Status.StoredVersions).To(Equal([]string{"v1beta1"}))
		Expect(storedAPIVersions(ctx, pizzaGroup, "pizzas")).To(And(HaveLen(objects), HaveEach(pizzaGroup+"/v1beta1")))
	})

	It("shows DiscoveryFailed while discovery fails, and goes on when it answers again", func(ctx SpecContext) {
		const group = "discovery.test.graduator.io"
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, 50)
		var broken atomic.Bool
		broken.Store(true)
		op := startOperatorWith(operatorOptions{fault: func(req *http.Request) *http.Response {
			if broken.Load() && req.Method == http.MethodGet && req.URL.Path == "/apis/"+group+"/v2" {
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Request: req, Header: http.Header{},
					Body: io.NopCloser(strings.NewReader("aggregated API unavailable"))}
			}
			return nil
		}})
		DeferCleanup(op.stop)
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v2",
				Migration:      graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: time.Second}},
			},
		})
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonDiscoveryFailed),
				HaveField("Message", ContainSubstring("Discovery failed"))))
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"))

		broken.Store(false)
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
	})

	It("shows Forbidden naming the rule to add when the operator may not write the objects, writes nothing, and recovers once granted", func(ctx SpecContext) {
		const group = "forbidden.test.graduator.io"
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, 50)

		By("an operator whose role lacks patch on the widgets")
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "graduator-forbidden-spec"},
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
			ObjectMeta: metav1.ObjectMeta{Name: "graduator-forbidden-spec"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "graduator-forbidden-spec"}},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(k8sClient.Delete, binding)
		user, err := testEnv.AddUser(envtest.User{Name: "graduator-forbidden-spec"}, nil)
		Expect(err).NotTo(HaveOccurred())
		op := startOperatorWith(operatorOptions{config: user.Config()})
		DeferCleanup(op.stop)

		By("the CRD manifest switching storage to v2 (GitOps mode)")
		live := getCRD(ctx, crd.Name)
		for i := range live.Spec.Versions {
			live.Spec.Versions[i].Storage = live.Spec.Versions[i].Name == "v2"
		}
		Expect(k8sClient.Update(ctx, live)).To(Succeed())
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				Migration: graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: time.Second}},
			},
		})
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonForbidden),
				HaveField("Message", And(ContainSubstring("not allowed to patch widgets."+group),
					ContainSubstring(access.RuleFor(group))))))
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"), "nothing is pruned")
		Expect(storedAPIVersions(ctx, group, "widgets")).To(HaveEach(group+"/v1"), "nothing was written")

		By("granting patch")
		Eventually(func() error {
			var r rbacv1.ClusterRole
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(role), &r); err != nil {
				return err
			}
			r.Rules[len(r.Rules)-1].Verbs = append(r.Rules[len(r.Rules)-1].Verbs, "patch")
			return k8sClient.Update(ctx, &r)
		}).Should(Succeed())
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(50), HaveEach(group+"/v2")))
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
	})
})
