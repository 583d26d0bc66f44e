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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/gitops"
	"github.com/graduator/graduator/test/pizzaenv"
)

var _ = Describe("The migration's writes at the version the objects' writers used", func() {
	// Pizzas created and then patched by two field managers at v1alpha1
	// (two managedFields entries there), as controllers that have not moved
	// to v1beta1 leave them; then v1beta1 stores.
	const pizzas = 40
	It("change nothing but the encoding, with at most 6 ConversionReviews per object", func(ctx SpecContext) {
		webhook, err := pizzaenv.StartWebhook(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(webhook.Stop)
		apply := func(n int) {
			GinkgoHelper()
			stage, err := pizzaenv.Stage(n)
			Expect(err).NotTo(HaveOccurred())
			webhook.PointConversionAt(stage)
			Expect(gitops.Apply(ctx, env.Client, stage)).To(Succeed())
			Expect(pizzaenv.WaitServed(ctx, env.Client, env.Dynamic, pizzaenv.CRDName)).To(Succeed())
		}
		apply(2) // v1alpha1 stores, v1beta1 served through the webhook
		DeferCleanup(func(ctx SpecContext) {
			Expect(envtestutil.DeleteCRD(ctx, env.Client, pizzaenv.CRDName, 2*time.Minute)).To(Succeed())
		})
		alpha := env.Dynamic.Resource(pizzaenv.Resource("v1alpha1")).Namespace("default")
		for i := range pizzas {
			obj := &unstructured.Unstructured{}
			Expect(env.Client.Scheme().Convert(pizzaenv.SampleV1alpha1(i), obj, nil)).To(Succeed())
			_, err := alpha.Create(ctx, obj, metav1.CreateOptions{FieldManager: "order-desk"})
			Expect(err).NotTo(HaveOccurred())
			_, err = alpha.Patch(ctx, obj.GetName(), types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"restaurant.example.com/oven":"2"}}}`), metav1.PatchOptions{FieldManager: "oven"})
			Expect(err).NotTo(HaveOccurred())
		}
		apply(3) // v1beta1 stores
		waitStoredAs(ctx, pizzaenv.Resource("v1beta1"), "Pizza", "restaurant.example.com/v1beta1")
		Expect(env.Etcd.Counts(ctx, "restaurant.example.com", "pizzas")).To(Equal(map[string]int{"restaurant.example.com/v1alpha1": pizzas}))
		before := pizzaViews(ctx)
		for _, obj := range before["v1alpha1"] {
			Expect(obj.GetManagedFields()).To(HaveLen(2))
			for _, e := range obj.GetManagedFields() {
				Expect(e.APIVersion).To(Equal("restaurant.example.com/v1alpha1"))
			}
		}

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
		Expect(perObject).To(BeNumerically("<=", 6), "the writes convert as if sent at the storage version")

		By("etcd holds every object in the storage version")
		Expect(env.Etcd.Counts(ctx, "restaurant.example.com", "pizzas")).To(Equal(map[string]int{"restaurant.example.com/v1beta1": pizzas}))
		By("each object, read at every served version, is what it was, managedFields included")
		after := pizzaViews(ctx)
		for version, objs := range before {
			Expect(after[version]).To(HaveLen(len(objs)))
			for key, obj := range objs {
				Expect(after[version][key]).To(Equal(obj), "%s at %s", key, version)
			}
		}
	})
})

// pizzaViews reads every Pizza of namespace default at each served version,
// keyed by version and name, without what a no-op write may change: the
// resourceVersion and the managedFields entries' timestamps.
func pizzaViews(ctx SpecContext) map[string]map[string]*unstructured.Unstructured {
	GinkgoHelper()
	views := map[string]map[string]*unstructured.Unstructured{}
	for _, version := range []string{"v1alpha1", "v1beta1"} {
		list, err := env.Dynamic.Resource(pizzaenv.Resource(version)).Namespace("default").List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		views[version] = map[string]*unstructured.Unstructured{}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetResourceVersion("")
			entries := obj.GetManagedFields()
			for j := range entries {
				entries[j].Time = nil
			}
			obj.SetManagedFields(entries)
			views[version][fmt.Sprint(obj.GetName())] = obj
		}
	}
	return views
}
