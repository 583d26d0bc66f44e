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

package intree_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/storagemigration"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/pizzaenv"
)

// kcmUser is who kube-controller-manager writes as (StartControllerManager).
const kcmUser = "kube-controller-manager"

var _ = Describe("Engine StorageVersionMigration", func() {
	It("has the in-tree migrator rewrite every object, then prunes, retires the old version and ends Ready", func(ctx SpecContext) {
		const group, objects = "engine.test.graduator.io", 200
		crd := installWidgets(ctx, group, objects)
		startOperator()
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v2",
				Unserve:        []graduatorv1alpha1.UnservedVersion{{Version: "v1", After: &metav1.Duration{}}},
				Migration: graduatorv1alpha1.MigrationSettings{
					Engine: graduatorv1alpha1.EngineStorageVersionMigration, SettleDelay: &metav1.Duration{Duration: time.Second},
				},
			},
		})
		Eventually(readyOf(ctx, crd.Name)).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))

		Expect(etcd.Counts(ctx, group, "widgets")).To(Equal(map[string]int{group + "/v2": objects}), "etcd holds every object as v2")
		now := getCRD(ctx, crd.Name)
		Expect(now.Status.StoredVersions).To(Equal([]string{"v2"}))
		Expect(apihelpers.HasServedCRDVersion(now, "v1")).To(BeFalse(), "v1 is retired")
		policy := getPolicy(ctx, crd.Name)
		Expect(policy.Status.Migration.StorageVersionMigration).To(HaveValue(And(
			HaveField("Name", storagemigration.NameFor(crd.Name)), HaveField("Phase", "Succeeded"), HaveField("Created", int32(1)))))
		// The message names the in-tree run unless a reconcile of a policy
		// read from the cache before the run's completion was written came
		// last (its conditions are computed from that older status): both
		// say every object is migrated, which is what a user checks.
		Expect(meta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionMigrated)).To(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", BeElementOf(graduation.ReasonMigrated, graduation.ReasonNothingToMigrate))))
		Expect(policy.Status.Migration.CompletedAt).NotTo(BeNil(), "Graduator's check of the in-tree run completed")

		var svm svmv1.StorageVersionMigration
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: storagemigration.NameFor(crd.Name)}, &svm)).To(Succeed())
		Expect(storagemigration.PhaseOf(&svm)).To(Equal(storagemigration.Succeeded))
		Expect(svm.Spec.Resource).To(Equal(storagemigration.ResourceOf(crd)))
		Expect(svm.Labels).To(HaveKeyWithValue(storagemigration.ManagedByLabel, storagemigration.ManagedBy))
		Expect(svm.OwnerReferences).To(ContainElement(HaveField("UID", policy.UID)), "owned by the policy")

		writes, err := audit.Writes(group, "widgets")
		Expect(err).NotTo(HaveOccurred())
		byUser := map[string]int{}
		for _, w := range writes {
			if !w.DryRun {
				byUser[w.User]++
			}
		}
		Expect(byUser).To(HaveKeyWithValue(kcmUser, BeNumerically(">=", objects)), "the in-tree migrator wrote every object")
		GinkgoWriter.Printf("writes of widgets by user (dry runs excluded): %v\n", byUser)
	})

	// Kubernetes 1.37.2's migrator does not mark its run Failed when the
	// conversion webhook cannot be reached: it requeues the migration with
	// a backoff ("Error syncing SVM resource, retrying ... conversion webhook
	// ... connection refused" in kube-controller-manager's log). This spec
	// holds Graduator to the invariant during the outage whatever the
	// in-tree migrator does, and to finishing once the webhook is back.
	It("prunes nothing while the conversion webhook is down mid-run and etcd holds old objects, says why in Ready, and ends Ready once it is back",
		func(ctx SpecContext) {
			const objects = 400
			const group = "restaurant.example.com"
			webhook, err := pizzaenv.StartWebhook(ctx)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(webhook.Stop)
			stage, err := pizzaenv.Stage(2) // v1alpha1 stored, v1beta1 served through the webhook
			Expect(err).NotTo(HaveOccurred())
			webhook.PointConversionAt(stage)
			Expect(k8sClient.Create(ctx, stage)).To(Succeed())
			DeferCleanup(func(ctx context.Context) {
				Expect(envtestutil.DeleteCRD(ctx, k8sClient, pizzaenv.CRDName, time.Minute)).To(Succeed())
			})
			Expect(pizzaenv.WaitServed(ctx, k8sClient, dyn, pizzaenv.CRDName)).To(Succeed())
			Expect(envtestutil.ForEach(objects, 8, func(i int) error { return k8sClient.Create(ctx, pizzaenv.SampleV1alpha1(i)) })).
				To(Succeed())

			startOperator()
			createPolicy(ctx, inTreePolicy(pizzaenv.CRDName, "v1beta1"))
			By("waiting until the in-tree migrator has rewritten some pizzas")
			waitForStored(ctx, group, "pizzas", group+"/v1beta1", 20)

			By("stopping the conversion webhook mid-run")
			webhook.Stop()
			Consistently(func(g Gomega) {
				counts, err := etcd.Counts(ctx, group, "pizzas")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(counts).To(HaveKey(group+"/v1alpha1"), "the outage stopped the run part way")
				g.Expect(getCRD(ctx, pizzaenv.CRDName).Status.StoredVersions).To(ContainElement("v1alpha1"), "nothing is pruned")
				g.Expect(readyOf(ctx, pizzaenv.CRDName)()).NotTo(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
			}).WithContext(ctx).WithTimeout(15 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
			Eventually(readyOf(ctx, pizzaenv.CRDName)).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).
				Should(haveStatusReason(metav1.ConditionFalse, graduation.ReasonConversionFailed),
					"Ready says the in-tree migration is stuck on the conversion webhook (the migrator's status does not)")
			during := getPolicy(ctx, pizzaenv.CRDName)
			GinkgoWriter.Printf("during the outage: in-tree run %+v; Ready: %s\n", *during.Status.Migration.StorageVersionMigration,
				meta.FindStatusCondition(during.Status.Conditions, graduatorv1alpha1.ConditionReady).Message)

			By("starting the webhook again")
			Expect(webhook.Start(ctx)).To(Succeed())
			Eventually(readyOf(ctx, pizzaenv.CRDName)).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).
				Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
			Expect(getCRD(ctx, pizzaenv.CRDName).Status.StoredVersions).To(Equal([]string{"v1beta1"}))
			Expect(etcd.Counts(ctx, group, "pizzas")).To(Equal(map[string]int{group + "/v1beta1": objects}))
			GinkgoWriter.Printf("after: in-tree run %+v\n", *getPolicy(ctx, pizzaenv.CRDName).Status.Migration.StorageVersionMigration)
		})

	It("recreates a StorageVersionMigration that Failed on denied writes, says why in Ready, prunes nothing meanwhile, and ends Ready",
		func(ctx SpecContext) {
			const group, objects = "denied.test.graduator.io", 400
			crd := installWidgets(ctx, group, objects)
			By("denying every write of widgets but dry runs (a ValidatingAdmissionPolicy): the preflight passes, the in-tree run fails")
			vap, binding := envtestutil.DenyUpdates("deny-"+group, group, "widgets", "request.dryRun == true", "frozen by the spec")
			Expect(k8sClient.Create(ctx, vap)).To(Succeed())
			Expect(k8sClient.Create(ctx, binding)).To(Succeed())
			deny := func(ctx context.Context) {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, vap))).To(Succeed())
			}
			DeferCleanup(deny)
			// The API server enforces a new policy after a moment.
			Eventually(func() error {
				_, err := dyn.Resource(envtestutil.WidgetResource(group, "v1")).Namespace("default").Patch(ctx, "w0000",
					types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
				return err
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("frozen by the spec")))

			startOperator()
			policy := inTreePolicy(crd.Name, "v2")
			policy.Spec.Unserve = []graduatorv1alpha1.UnservedVersion{{Version: "v1", After: &metav1.Duration{}}}
			createPolicy(ctx, policy)
			Eventually(readyOf(ctx, crd.Name)).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).
				Should(And(haveStatusReason(metav1.ConditionFalse, graduation.ReasonInTreeMigrationFailed),
					HaveField("Message", And(ContainSubstring(storagemigration.NameFor(crd.Name)), ContainSubstring("retrying in")))))
			GinkgoWriter.Printf("Ready while writes are denied: %s\n", readyOf(ctx, crd.Name)().Message)
			Consistently(func(g Gomega) {
				counts, err := etcd.Counts(ctx, group, "widgets")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(counts).To(Equal(map[string]int{group + "/v1": objects}), "no write went through")
				g.Expect(apihelpers.HasServedCRDVersion(getCRD(ctx, crd.Name), "v1")).To(BeTrue(), "v1 is not retired")
				g.Expect(readyOf(ctx, crd.Name)()).To(HaveField("Status", metav1.ConditionFalse))
			}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
			// Kubernetes 1.37.2's migrator was seen pruning storedVersions after
			// a run that Failed on its first object; Graduator cannot stop
			// that, only refuse to take it for a migration.
			GinkgoWriter.Printf("storedVersions while every object is stored as v1: %v\n", getCRD(ctx, crd.Name).Status.StoredVersions)

			By("allowing writes again")
			deny(ctx)
			Eventually(readyOf(ctx, crd.Name)).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).
				Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
			done := getPolicy(ctx, crd.Name)
			Expect(done.Status.Retries).To(BeZero())
			Expect(done.Status.Migration.StorageVersionMigration.Created).To(BeNumerically(">=", 2), "created again after it Failed")
			GinkgoWriter.Printf("after: %+v; Migrated: %s\n", *done.Status.Migration.StorageVersionMigration,
				meta.FindStatusCondition(done.Status.Conditions, graduatorv1alpha1.ConditionMigrated).Message)
			Expect(getCRD(ctx, crd.Name).Status.StoredVersions).To(Equal([]string{"v2"}))
			Expect(etcd.Counts(ctx, group, "widgets")).To(Equal(map[string]int{group + "/v2": objects}))
		})
})

// inTreePolicy graduates crdName to version with engine
// StorageVersionMigration.
func inTreePolicy(crdName, version string) *graduatorv1alpha1.CRDVersionPolicy {
	return &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			StorageVersion: version,
			Migration: graduatorv1alpha1.MigrationSettings{
				Engine: graduatorv1alpha1.EngineStorageVersionMigration, SettleDelay: &metav1.Duration{Duration: time.Second},
			},
		},
	}
}

// waitForStored waits until etcd holds at least n objects of the resource
// encoded as apiVersion. The in-tree migrator can take minutes to start: it
// waits until the garbage collector's cache of the resource is as recent as
// a fresh LIST ("GC cache is not up to date, requeuing"), which, with no
// write of the resource, only a watch bookmark brings.
func waitForStored(ctx context.Context, group, plural, apiVersion string, n int) {
	GinkgoHelper()
	Eventually(func(g Gomega) int {
		counts, err := etcd.Counts(ctx, group, plural)
		g.Expect(err).NotTo(HaveOccurred())
		return counts[apiVersion]
	}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", n))
}

var _ = Describe("A StorageVersionMigration created by hand while a Graduator policy waits to migrate", func() {
	It("is the only run: no object is patched by two migrators at once, and the policy ends Ready", func(ctx SpecContext) {
		// Enough objects that the in-tree run (one patch after another) still
		// runs when the policy's settle delay ends.
		const group, objects = "byhand.test.graduator.io", 1500
		crd := installWidgets(ctx, group, objects)
		startOperator()
		createPolicy(ctx, &graduatorv1alpha1.CRDVersionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
			Spec: graduatorv1alpha1.CRDVersionPolicySpec{
				StorageVersion: "v2",
				// Long enough for the in-tree run to start (and mark the CRD)
				// before ours could; shorter than the in-tree run.
				Migration: graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: 6 * time.Second}},
			},
		})
		Eventually(conditionOf(ctx, crd.Name, graduatorv1alpha1.ConditionMigrated)).WithContext(ctx).WithTimeout(time.Minute).
			WithPolling(100 * time.Millisecond).Should(haveStatusReason(metav1.ConditionFalse, graduation.ReasonSettling))
		svm := &svmv1.StorageVersionMigration{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets-by-hand-" + group},
			Spec:       svmv1.StorageVersionMigrationSpec{Resource: storagemigration.ResourceOf(crd)},
		}
		Expect(k8sClient.Create(ctx, svm)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, svm))).To(Succeed()) })
		Eventually(readyOf(ctx, crd.Name)).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).
			Should(haveStatusReason(metav1.ConditionTrue, graduation.ReasonGraduated))
		Expect(etcd.Counts(ctx, group, "widgets")).To(Equal(map[string]int{group + "/v2": objects}))

		writes, err := audit.Writes(group, "widgets")
		Expect(err).NotTo(HaveOccurred())
		type span struct{ first, last time.Time }
		runs := map[string]*span{}
		perObject := map[string]map[string]int{}
		for _, w := range writes {
			if w.DryRun || w.Verb != "patch" {
				continue
			}
			key := w.Namespace + "/" + w.Name
			if perObject[key] == nil {
				perObject[key] = map[string]int{}
			}
			perObject[key][w.User]++
			s := runs[w.User]
			if s == nil {
				s = &span{first: w.Received, last: w.Completed}
				runs[w.User] = s
			}
			if w.Received.Before(s.first) {
				s.first = w.Received
			}
			if w.Completed.After(s.last) {
				s.last = w.Completed
			}
		}
		GinkgoWriter.Printf("migrators (first write .. last write): ")
		for user, s := range runs {
			GinkgoWriter.Printf("%s %s..%s (%s); ", user, s.first.Format(time.RFC3339Nano), s.last.Format(time.RFC3339Nano), s.last.Sub(s.first))
		}
		GinkgoWriter.Println()
		Expect(perObject).To(HaveLen(objects), "every object was patched")
		for key, byUser := range perObject {
			Expect(byUser).To(HaveKeyWithValue(kcmUser, 1), "%s: the in-tree migrator patched it once", key)
		}
		users := make([]string, 0, len(runs))
		for user := range runs {
			users = append(users, user)
		}
		slices.Sort(users)
		for i, a := range users {
			for _, b := range users[i+1:] {
				overlap := runs[a].first.Before(runs[b].last) && runs[b].first.Before(runs[a].last)
				Expect(overlap).To(BeFalse(), "%s (%s..%s) and %s (%s..%s) patched widgets at the same time", a,
					runs[a].first.Format(time.StampMicro), runs[a].last.Format(time.StampMicro), b,
					runs[b].first.Format(time.StampMicro), runs[b].last.Format(time.StampMicro))
			}
		}
	})
})

// installWidgets creates a widget CRD storing v1 (v2 served, same schema)
// and objects at v1, and deletes it when the spec ends.
func installWidgets(ctx context.Context, group string, objects int) *apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	crd := envtestutil.WidgetCRD(group, "v1", "v2")
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(envtestutil.DeleteCRD(ctx, k8sClient, crd.Name, time.Minute)).To(Succeed())
	})
	Expect(envtestutil.WaitServed(ctx, k8sClient, dyn, crd.Name)).To(Succeed())
	v1 := envtestutil.WidgetResource(group, "v1")
	Expect(envtestutil.CreateObjects(ctx, dyn, v1, objects, 8, func(i int) *unstructured.Unstructured {
		return envtestutil.Widget(v1, "default", fmt.Sprintf("w%04d", i), map[string]any{"color": "blue", "size": int64(i)})
	})).To(Succeed())
	return crd
}

// createPolicy creates the policy and deletes it when the spec ends.
func createPolicy(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed()) })
}

func getPolicy(ctx context.Context, name string) *graduatorv1alpha1.CRDVersionPolicy {
	GinkgoHelper()
	var p graduatorv1alpha1.CRDVersionPolicy
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p)).To(Succeed())
	return &p
}

func getCRD(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition {
	GinkgoHelper()
	var crd apiextensionsv1.CustomResourceDefinition
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, &crd)).To(Succeed())
	return &crd
}

// conditionOf returns a condition of the policy, for Eventually.
func conditionOf(ctx context.Context, name, condType string) func() *metav1.Condition {
	return func() *metav1.Condition {
		var p graduatorv1alpha1.CRDVersionPolicy
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			return nil
		}
		return meta.FindStatusCondition(p.Status.Conditions, condType)
	}
}

func readyOf(ctx context.Context, name string) func() *metav1.Condition {
	return conditionOf(ctx, name, graduatorv1alpha1.ConditionReady)
}

// haveStatusReason matches a condition with the status and reason.
func haveStatusReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}
