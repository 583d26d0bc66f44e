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

// Package conversion_test runs the sample Pizza conversion webhook against a
// real kube-apiserver: objects written at one version read back converted at
// the others, nothing is lost through an older version, and an outage shows
// as the API server's conversion error.
package conversion_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/graduator/graduator/conversion/v1"
	"github.com/graduator/graduator/conversion/v1alpha1"
	"github.com/graduator/graduator/conversion/v1beta1"
	"github.com/graduator/graduator/test/envtestutil"
	"github.com/graduator/graduator/test/envtestutil/envsuite"
	"github.com/graduator/graduator/test/pizzaenv"
)

var (
	k8sClient client.Client
	webhook   *pizzaenv.Webhook
)

func TestConversion(t *testing.T) {
	envsuite.RunSpecs(t, "Pizza conversion webhook suite (envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	env := envsuite.Start(envtestutil.Options{AddToScheme: []func(*runtime.Scheme) error{pizzaenv.AddToScheme}})
	k8sClient = env.Client
	var err error
	webhook, err = pizzaenv.StartWebhook(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(webhook.Stop)
	crd, err := pizzaenv.Stage(4) // v1alpha1, v1beta1 and v1 served
	Expect(err).NotTo(HaveOccurred())
	webhook.PointConversionAt(crd)
	Expect(k8sClient.Create(ctx, crd)).To(Succeed())
	Expect(pizzaenv.WaitServed(ctx, k8sClient, env.Dynamic, crd.Name)).To(Succeed())
})

var _ = Describe("The Pizza conversion webhook", func() {
	It("serves a Pizza created at v1alpha1 converted at v1beta1 and v1", func(ctx SpecContext) {
		alpha := &v1alpha1.Pizza{
			ObjectMeta: metav1.ObjectMeta{Name: "quattro", Namespace: "default"},
			Spec:       v1alpha1.PizzaSpec{Sauce: "cream", Size: "large", Toppings: []string{"gorgonzola", "parmesan"}},
		}
		Expect(k8sClient.Create(ctx, alpha)).To(Succeed())

		var beta v1beta1.Pizza
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(alpha), &beta)).To(Succeed())
		Expect(beta.Spec).To(Equal(v1beta1.PizzaSpec{
			Base: "cream", Size: "large", Toppings: []v1beta1.Topping{{Name: "gorgonzola"}, {Name: "parmesan"}},
		}))
		var hub v1.Pizza
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(alpha), &hub)).To(Succeed())
		Expect(hub.Spec.Base).To(Equal("cream"))
		Expect(hub.Spec.Toppings).To(Equal([]v1.Topping{{Name: "gorgonzola"}, {Name: "parmesan"}}))
	})

	It("keeps fields only v1 has when the Pizza is updated through v1alpha1", func(ctx SpecContext) {
		hub := &v1.Pizza{
			ObjectMeta: metav1.ObjectMeta{Name: "diavola", Namespace: "default"},
			Spec: v1.PizzaSpec{Base: "tomato", Size: "medium", Crust: "thin",
				Toppings: []v1.Topping{{Name: "salami", Extra: true, Grams: ptr.To[int32](90)}},
				Delivery: &v1.Delivery{Address: "7 Vesuvio Way", Express: true}},
		}
		Expect(k8sClient.Create(ctx, hub)).To(Succeed())

		var alpha v1alpha1.Pizza
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hub), &alpha)).To(Succeed())
		Expect(alpha.Spec.Sauce).To(Equal("tomato"))
		alpha.Spec.Size = "large"
		Expect(k8sClient.Update(ctx, &alpha)).To(Succeed())

		var after v1.Pizza
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(hub), &after)).To(Succeed())
		Expect(after.Spec.Size).To(Equal("large"), "the change made through v1alpha1 is there")
		Expect(after.Spec.Crust).To(Equal("thin"))
		Expect(after.Spec.Delivery).To(Equal(&v1.Delivery{Address: "7 Vesuvio Way", Express: true}))
		Expect(after.Spec.Toppings).To(Equal([]v1.Topping{{Name: "salami", Extra: true, Grams: ptr.To[int32](90)}}))
		Expect(after.Annotations).NotTo(HaveKey("restaurant.example.com/conversion-data"))
	})

	It("fails reads at another version with the API server's conversion error while the webhook is down", func(ctx SpecContext) {
		alpha := &v1alpha1.Pizza{
			ObjectMeta: metav1.ObjectMeta{Name: "marinara", Namespace: "default"},
			Spec:       v1alpha1.PizzaSpec{Sauce: "tomato", Size: "small"},
		}
		Expect(k8sClient.Create(ctx, alpha)).To(Succeed())
		webhook.Stop()
		DeferCleanup(func(ctx SpecContext) { Expect(webhook.Start(ctx)).To(Succeed()) })

		// v1beta1 stores (stage 4), so the v1alpha1 object went through the
		// webhook on its way in; reading it at v1 needs the webhook again.
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(alpha), &v1.Pizza{})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(
			ContainSubstring("conversion webhook for restaurant.example.com/v1beta1, Kind=Pizza failed"),
			ContainSubstring("connection refused"),
		))
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(alpha), &v1beta1.Pizza{})
		}).WithTimeout(5*time.Second).Should(Succeed(), "reading at the storage version needs no conversion")
	})
})
