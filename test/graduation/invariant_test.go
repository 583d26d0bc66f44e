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
	"github.com/graduator/graduator/snapshot"
)

// Nothing counts as migrated unless the API server said so.
var _ = Describe("A policy with writeTo: Status", func() {
	const objects = 300

	// storedAtV1WithV2Added installs a widget CRD storing v1 with objects,
	// then adds v2, as a CRD author's next release would.
	storedAtV1WithV2Added := func(ctx SpecContext, group string, statusSubresource bool) (*apiextensionsv1.CustomResourceDefinition, *snapshot.Snapshot) {
		crd := widgetCRD(group, "v1")
		if statusSubresource {
			withStatus(crd)
		}
		installCRD(ctx, crd)
		v1 := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
		createWidgets(ctx, v1, objects)
		before, err := snapshot.Take(ctx, dyn, v1)
		Expect(err).NotTo(HaveOccurred())

		live := getCRD(ctx, crd.Name)
		next := widgetCRD(group, "v1", "v2")
		if statusSubresource {
			withStatus(next)
		}
		live.Spec.Versions = next.Spec.Versions
		Expect(k8sClient.Update(ctx, live)).To(Succeed())
		installed := getCRD(ctx, crd.Name)
		Eventually(func() error {
			_, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}).
				List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		return installed, before
	}
	policyFor := func(crd *apiextensionsv1.CustomResourceDefinition) *graduatorv1alpha1.CRDVersionPolicy {
		return &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v2",
				Migration: graduatorv1alpha1.MigrationSettings{
					WriteTo: graduatorv1alpha1.WriteToStatus, PageSize: 50, SettleDelay: &metav1.Duration{Duration: time.Second},
				},
			},
		}
	}

	It("is refused when the version has no status subresource: nothing is switched, rewritten or pruned", func(ctx SpecContext) {
		group := "nostatus.test.graduator.io"
		crd, before := storedAtV1WithV2Added(ctx, group, false)
		op := startOperatorWith(operatorOptions{})
		DeferCleanup(op.stop)
		createPolicy(ctx, policyFor(crd))

		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonStatusSubresourceMissing),
				HaveField("Message", ContainSubstring("no status subresource"))))
		Consistently(func(g Gomega) {
			live := getCRD(ctx, crd.Name)
			g.Expect(live.Status.StoredVersions).To(Equal([]string{"v1"}), "storedVersions still lists v1")
			g.Expect(graduation.StorageVersion(live)).To(Equal("v1"), "the storage version was not switched")
		}).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v1")),
			"etcd holds every widget at v1")
		Expect(before.Verify(ctx, dyn)).To(BeEmpty(), "no widget changed")
		Expect(op.requests.writes("widgets", time.Time{})).To(BeEmpty(), "not one write was sent")
	})

	It("migrates every object through /status and prunes when the version has the subresource", func(ctx SpecContext) {
		group := "withstatus.test.graduator.io"
		crd, before := storedAtV1WithV2Added(ctx, group, true)
		op := startOperatorWith(operatorOptions{})
		DeferCleanup(op.stop)
		createPolicy(ctx, policyFor(crd))

		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v2")),
			"etcd holds every widget at v2")
		Expect(before.Verify(ctx, dyn)).To(BeEmpty(), "no widget changed")
		for _, w := range op.requests.writes("widgets", time.Time{}) {
			Expect(w.path).To(HaveSuffix("/status"), "every write went to the status subresource")
		}
		run := getPolicy(ctx, crd.Name).Status.Migration
		Expect(run.Rewritten).To(BeEquivalentTo(objects))
		Expect(run.Failed).To(BeZero())
	})
})

var _ = Describe("Pausing a policy in the middle of a migration", func() {
	It("stops the writes between two objects, keeps what was done, and resumes when unpaused", func(ctx SpecContext) {
		const (
			group   = "pause.test.graduator.io"
			objects = 400
		)
		crd := widgetCRD(group, "v1", "v2")
		installCRD(ctx, crd)
		createWidgets(ctx, schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, objects)
		op := startOperatorWith(operatorOptions{})
		DeferCleanup(op.stop)
		// 4 pages of 100, so the pause lands mid-page.
		policy := slowPolicy(crd.Name, "v2", 100)
		createPolicy(ctx, policy)
		waitForWrites(op, "widgets", 130)

		By("pausing")
		Expect(k8sClient.Patch(ctx, policy, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":true}}`)))).To(Succeed())
		pausedAt := time.Now()
		Eventually(policyCondition(ctx, crd.Name, graduatorv1alpha1.ConditionReady)).WithTimeout(30 * time.Second).
			Should(haveStatusReason(metav1.ConditionFalse, graduation.ReasonPaused))
		// Writes already on the wire when the pause arrived may land: at most
		// one per writer, once the watch delivered the pause (well within 1 s;
		// without the interruption the page goes on for about 2 s more).
		Expect(len(op.requests.writes("widgets", pausedAt.Add(time.Second)))).To(BeNumerically("<=", 2),
			"no write goes out once the pause is seen")
		quiet := time.Now()
		Consistently(func() int { return len(op.requests.writes("widgets", quiet)) }).WithTimeout(3 * time.Second).Should(BeZero())
		paused := getPolicy(ctx, crd.Name)
		Expect(paused.Status.Migration.CompletedAt).To(BeNil())
		Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(ConsistOf("v1", "v2"), "nothing is pruned while paused")
		Expect(conditionOf(paused, graduatorv1alpha1.ConditionPreflightPassed).Status).To(Equal(metav1.ConditionTrue),
			"a condition that was True stays True")

		By("unpausing")
		Expect(k8sClient.Patch(ctx, policy, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"paused":false}}`)))).To(Succeed())
		Eventually(func() []string { return getCRD(ctx, crd.Name).Status.StoredVersions }).WithTimeout(2 * time.Minute).
			Should(Equal([]string{"v2"}))
		Expect(storedAPIVersions(ctx, group, "widgets")).To(And(HaveLen(objects), HaveEach(group+"/v2")))
		Expect(getPolicy(ctx, crd.Name).Status.Migration.Listed).To(BeNumerically("<", objects+100),
			"it resumed from the saved page, not from the start")
	})
})

// withStatus enables the status subresource on every version.
func withStatus(crd *apiextensionsv1.CustomResourceDefinition) {
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Subresources = &apiextensionsv1.CustomResourceSubresources{
			Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		}
	}
}

// conditionOf returns a condition of the policy, or an empty one.
func conditionOf(p *graduatorv1alpha1.CRDVersionPolicy, condType string) metav1.Condition {
	for _, c := range p.Status.Conditions {
		if c.Type == condType {
			return c
		}
	}
	return metav1.Condition{}
}
