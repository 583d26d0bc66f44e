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

package roundtrip_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/gitops"
	"github.com/graduator/graduator/test/pizzaenv"
)

var _ = Describe("The migration's writes at the version the objects' writers used", func() {
	const pizzas = 40
	// A write at the storage version of an object with two managedFields
	// entries at v1alpha1 costs 10 ConversionReviews, at v1alpha1 about 5;
	// the target is at most 6. Counted once the API server has finished
	// refilling its watch caches after the storage switch, which converts
	// every object once in the background.
	const maxReviewsPerObject = 6
	It("change nothing but the encoding, with half the ConversionReviews of a write at the storage version", func(ctx SpecContext) {
		pizzasAtOldVersion(ctx, pizzas)
		before := pizzaViews(ctx)
		for _, obj := range before["v1alpha1"] {
			Expect(obj.GetManagedFields()).To(HaveLen(2))
			for _, e := range obj.GetManagedFields() {
				Expect(e.APIVersion).To(Equal("restaurant.example.com/v1alpha1"))
			}
		}

		// What the write at the storage version would store, as a dry run.
		stored := map[string]*unstructured.Unstructured{}
		beta := env.Dynamic.Resource(pizzaenv.Resource("v1beta1")).Namespace("default")
		for name := range before["v1beta1"] {
			written, err := beta.Patch(ctx, name, types.MergePatchType, []byte(`{}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			Expect(err).NotTo(HaveOccurred())
			stored[name] = comparable(written)
		}

		Expect(envtestutil.WaitConversionsQuiet(ctx, env.Config, pizzaenv.CRDName)).To(Succeed())
		reviewsBefore, err := envtestutil.ConversionReviews(ctx, env.Config, pizzaenv.CRDName)
		Expect(err).NotTo(HaveOccurred())
		result, err := migration.Run(ctx, env.Dynamic, migration.Options{Resource: pizzaenv.Resource("v1beta1"), Config: env.Config,
			WriteVersions: []string{"v1alpha1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Rewritten).To(BeEquivalentTo(pizzas))
		reviewsAfter, err := envtestutil.ConversionReviews(ctx, env.Config, pizzaenv.CRDName)
		Expect(err).NotTo(HaveOccurred())
		perObject := (reviewsAfter - reviewsBefore) / pizzas
		GinkgoWriter.Printf("ConversionReviews per object: %.2f\n", perObject)
		Expect(perObject).To(BeNumerically("<=", maxReviewsPerObject), "the writes convert as if sent at the storage version")

		By("etcd holds every object in the storage version")
		Expect(env.Etcd.Counts(ctx, "restaurant.example.com", "pizzas")).To(Equal(map[string]int{"restaurant.example.com/v1beta1": pizzas}))
		after := pizzaViews(ctx)
		By("each object is stored as the write at the storage version would have stored it, managedFields included")
		Expect(after["v1beta1"]).To(HaveLen(pizzas))
		for name, obj := range stored {
			Expect(after["v1beta1"][name]).To(Equal(obj), name)
		}
		By("each object, read at every served version, is what it was but the empty status the conversion adds")
		for version, objs := range before {
			Expect(after[version]).To(HaveLen(len(objs)))
			for name, obj := range objs {
				Expect(withoutEmptyStatus(after[version][name])).To(Equal(withoutEmptyStatus(obj)), "%s at %s", name, version)
			}
		}
	})

	It("go to the storage version where admission refuses the old one", func(ctx SpecContext) {
		const n = 10
		pizzasAtOldVersion(ctx, n)
		policy, binding := envtestutil.DenyUpdates("no-v1alpha1-writes", "restaurant.example.com", "pizzas",
			"request.requestKind.version != 'v1alpha1'", "v1alpha1 is read-only")
		Expect(env.Client.Create(ctx, policy)).To(Succeed())
		Expect(env.Client.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(env.Client.Delete(ctx, binding)).To(Succeed())
			Expect(env.Client.Delete(ctx, policy)).To(Succeed())
		})
		Eventually(func() bool {
			_, err := env.Dynamic.Resource(pizzaenv.Resource("v1alpha1")).Namespace("default").Patch(ctx, pizzaenv.SampleV1alpha1(0).Name,
				types.MergePatchType, []byte(`{}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
		}).WithTimeout(30*time.Second).Should(BeTrue(), "the admission policy refuses writes at v1alpha1")

		result, err := migration.Run(ctx, env.Dynamic, migration.Options{Resource: pizzaenv.Resource("v1beta1"), Config: env.Config,
			WriteVersions: []string{"v1alpha1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(result.Complete).To(BeTrue())
		Expect(result.Failed).To(BeZero(), "%v", result.Failures)
		Expect(result.Rewritten).To(BeEquivalentTo(n))
		Expect(env.Etcd.Counts(ctx, "restaurant.example.com", "pizzas")).To(Equal(map[string]int{"restaurant.example.com/v1beta1": n}))
	})
})

// pizzasAtOldVersion installs the Pizza CRD with its webhook (stopped and
// the CRD deleted when the spec ends) and n Pizzas created at v1alpha1 by
// one field manager and annotated there by another (two managedFields
// entries at v1alpha1, as controllers that have not moved to v1beta1 leave
// them); then v1beta1 stores, and the Pizzas are still stored at v1alpha1.
func pizzasAtOldVersion(ctx SpecContext, n int) {
	GinkgoHelper()
	webhook, err := pizzaenv.StartWebhook(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(webhook.Stop)
	stage, err := pizzaenv.Stage(2) // v1alpha1 stores, v1beta1 served through the webhook
	Expect(err).NotTo(HaveOccurred())
	webhook.PointConversionAt(stage)
	Expect(gitops.Apply(ctx, env.Client, stage)).To(Succeed())
	Expect(pizzaenv.WaitServed(ctx, env.Client, env.Dynamic, pizzaenv.CRDName)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(envtestutil.DeleteCRD(ctx, env.Client, pizzaenv.CRDName, 2*time.Minute)).To(Succeed())
	})
	alpha := env.Dynamic.Resource(pizzaenv.Resource("v1alpha1")).Namespace("default")
	for i := range n {
		obj := &unstructured.Unstructured{}
		Expect(env.Client.Scheme().Convert(pizzaenv.SampleV1alpha1(i), obj, nil)).To(Succeed())
		_, err := alpha.Create(ctx, obj, metav1.CreateOptions{FieldManager: "order-desk"})
		Expect(err).NotTo(HaveOccurred())
		_, err = alpha.Patch(ctx, obj.GetName(), types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"restaurant.example.com/oven":"2"}}}`), metav1.PatchOptions{FieldManager: "oven"})
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(envtestutil.SetStorageVersion(ctx, env.Client, pizzaenv.CRDName, "v1beta1")).To(Succeed())
	waitStoredAs(ctx, pizzaenv.Resource("v1beta1"), "Pizza", "restaurant.example.com/v1beta1")
	Expect(env.Etcd.Counts(ctx, "restaurant.example.com", "pizzas")).To(Equal(map[string]int{"restaurant.example.com/v1alpha1": n}))
}

// pizzaViews reads every Pizza of namespace default at each served version,
// keyed by version and name, comparable.
func pizzaViews(ctx SpecContext) map[string]map[string]*unstructured.Unstructured {
	GinkgoHelper()
	views := map[string]map[string]*unstructured.Unstructured{}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		list, err := env.Dynamic.Resource(pizzaenv.Resource(version)).Namespace("default").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		views[version] = map[string]*unstructured.Unstructured{}
		for i := range list.Items {
			views[version][list.Items[i].GetName()] = comparable(&list.Items[i])
		}
	}
	return views
}

// comparable is obj without what a no-op write may change: the
// resourceVersion and the managedFields entries' timestamps.
func comparable(obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	obj.SetResourceVersion("")
	entries := obj.GetManagedFields()
	for j := range entries {
		entries[j].Time = nil
	}
	obj.SetManagedFields(entries)
	return obj
}

// withoutEmptyStatus is obj without an empty status, which the conversion
// to v1beta1 adds to a Pizza that has none (the storage version's write
// stores it too).
func withoutEmptyStatus(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if status, ok := obj.Object["status"].(map[string]any); ok && len(status) == 0 {
		obj = obj.DeepCopy()
		delete(obj.Object, "status")
	}
	return obj
}
