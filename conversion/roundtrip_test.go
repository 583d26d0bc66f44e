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

package conversion_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	pizzaconversion "github.com/graduator/graduator/conversion"
	v1 "github.com/graduator/graduator/conversion/v1"
	"github.com/graduator/graduator/conversion/v1alpha1"
	"github.com/graduator/graduator/conversion/v1beta1"
)

func TestConversion(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pizza conversions")
}

var meta = metav1.ObjectMeta{Name: "margherita", Namespace: "default", Labels: map[string]string{"menu": "classic"}}

var _ = Describe("v1alpha1 to v1", func() {
	It("renames sauce to base and turns topping names into toppings", func() {
		alpha := &v1alpha1.Pizza{ObjectMeta: meta, Spec: v1alpha1.PizzaSpec{Sauce: "pesto", Toppings: []string{"basil", "mozzarella"}, Size: "large"}}
		var hub v1.Pizza
		Expect(alpha.ConvertTo(&hub)).To(Succeed())
		Expect(hub.Spec).To(Equal(v1.PizzaSpec{
			Base: "pesto", Size: "large", Toppings: []v1.Topping{{Name: "basil"}, {Name: "mozzarella"}},
		}))
		Expect(hub.Labels).To(Equal(meta.Labels))
		Expect(hub.Annotations).To(BeNil())
	})

	It("keeps v1-only fields in an annotation and restores them on the way back", func() {
		hub := &v1.Pizza{ObjectMeta: meta, Spec: v1.PizzaSpec{
			Base: "tomato", Size: "small", Crust: "thick",
			Toppings: []v1.Topping{{Name: "ham", Extra: true, Grams: ptr.To[int32](80)}, {Name: "pineapple"}},
			Delivery: &v1.Delivery{Address: "1 Main St", Express: true},
		}}
		var alpha v1alpha1.Pizza
		Expect(alpha.ConvertFrom(hub)).To(Succeed())
		Expect(alpha.Spec).To(Equal(v1alpha1.PizzaSpec{Sauce: "tomato", Size: "small", Toppings: []string{"ham", "pineapple"}}))
		Expect(alpha.Annotations).To(HaveKey(pizzaconversion.DataAnnotation))

		var back v1.Pizza
		Expect(alpha.ConvertTo(&back)).To(Succeed())
		Expect(back.Spec).To(Equal(hub.Spec))
		Expect(back.Annotations).To(BeNil(), "the annotation is consumed")
	})

	It("drops the extras of a topping renamed through v1alpha1, keeping the others", func() {
		hub := &v1.Pizza{ObjectMeta: meta, Spec: v1.PizzaSpec{Base: "tomato", Size: "small",
			Toppings: []v1.Topping{{Name: "ham", Grams: ptr.To[int32](80)}, {Name: "olives", Extra: true}}}}
		var alpha v1alpha1.Pizza
		Expect(alpha.ConvertFrom(hub)).To(Succeed())
		alpha.Spec.Toppings[0] = "salami"
		var back v1.Pizza
		Expect(alpha.ConvertTo(&back)).To(Succeed())
		Expect(back.Spec.Toppings).To(Equal([]v1.Topping{{Name: "salami"}, {Name: "olives", Extra: true}}))
	})
})

var _ = Describe("v1beta1 to v1", func() {
	It("keeps crust and extra, and stashes grams and delivery", func() {
		hub := &v1.Pizza{ObjectMeta: meta, Spec: v1.PizzaSpec{
			Base: "cream", Size: "medium", Crust: "thin",
			Toppings: []v1.Topping{{Name: "mushrooms", Extra: true, Grams: ptr.To[int32](50)}},
			Delivery: &v1.Delivery{Address: "2 Side St"},
		}}
		var beta v1beta1.Pizza
		Expect(beta.ConvertFrom(hub)).To(Succeed())
		Expect(beta.Spec).To(Equal(v1beta1.PizzaSpec{Base: "cream", Size: "medium", Crust: "thin",
			Toppings: []v1beta1.Topping{{Name: "mushrooms", Extra: true}}}))
		var back v1.Pizza
		Expect(beta.ConvertTo(&back)).To(Succeed())
		Expect(back.Spec).To(Equal(hub.Spec))
	})
})

// Round trips, table-driven here and fuzzed below: every version -> hub ->
// version, and hub -> version -> hub, give back exactly what they were given.

func alphaRoundTrip(in *v1alpha1.Pizza) *v1alpha1.Pizza {
	var hub v1.Pizza
	ExpectWithOffset(1, in.DeepCopy().ConvertTo(&hub)).To(Succeed())
	var out v1alpha1.Pizza
	ExpectWithOffset(1, out.ConvertFrom(&hub)).To(Succeed())
	return &out
}

func betaRoundTrip(in *v1beta1.Pizza) *v1beta1.Pizza {
	var hub v1.Pizza
	ExpectWithOffset(1, in.DeepCopy().ConvertTo(&hub)).To(Succeed())
	var out v1beta1.Pizza
	ExpectWithOffset(1, out.ConvertFrom(&hub)).To(Succeed())
	return &out
}

func hubRoundTrips(in *v1.Pizza) (viaAlpha, viaBeta *v1.Pizza) {
	var alpha v1alpha1.Pizza
	ExpectWithOffset(1, alpha.ConvertFrom(in.DeepCopy())).To(Succeed())
	viaAlpha = &v1.Pizza{}
	ExpectWithOffset(1, alpha.ConvertTo(viaAlpha)).To(Succeed())
	var beta v1beta1.Pizza
	ExpectWithOffset(1, beta.ConvertFrom(in.DeepCopy())).To(Succeed())
	viaBeta = &v1.Pizza{}
	ExpectWithOffset(1, beta.ConvertTo(viaBeta)).To(Succeed())
	return viaAlpha, viaBeta
}

var conditions = []metav1.Condition{{Type: "Baked", Status: metav1.ConditionTrue, Reason: "OvenDone", Message: "12 minutes", ObservedGeneration: 2}}

var _ = DescribeTable("a hub Pizza survives a round trip through each older version",
	func(hub *v1.Pizza) {
		viaAlpha, viaBeta := hubRoundTrips(hub)
		Expect(viaAlpha).To(Equal(hub), "through v1alpha1")
		Expect(viaBeta).To(Equal(hub), "through v1beta1")
	},
	Entry("minimal", &v1.Pizza{ObjectMeta: meta, Spec: v1.PizzaSpec{Base: "tomato", Size: "medium"}}),
	Entry("every field", &v1.Pizza{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"note": "no onions"}},
		Spec: v1.PizzaSpec{Base: "pesto", Size: "large", Crust: "stuffed", Delivery: &v1.Delivery{Address: "3 High St", Express: true},
			Toppings: []v1.Topping{{Name: "a", Extra: true, Grams: ptr.To[int32](1)}, {Name: "a"}, {Name: "b", Grams: ptr.To[int32](1000)}}},
		Status: v1.PizzaStatus{ObservedGeneration: 2, Conditions: conditions}}),
	Entry("empty, not nil, toppings", &v1.Pizza{ObjectMeta: meta, Spec: v1.PizzaSpec{Base: "cream", Size: "small", Toppings: []v1.Topping{}}}),
	Entry("an empty annotation map", &v1.Pizza{ObjectMeta: metav1.ObjectMeta{Name: "y", Annotations: map[string]string{}}, Spec: v1.PizzaSpec{Base: "cream"}}),
)

var _ = DescribeTable("an older Pizza survives a round trip through the hub",
	func(alpha *v1alpha1.Pizza, beta *v1beta1.Pizza) {
		Expect(alphaRoundTrip(alpha)).To(Equal(alpha))
		Expect(betaRoundTrip(beta)).To(Equal(beta))
	},
	Entry("minimal", &v1alpha1.Pizza{ObjectMeta: meta}, &v1beta1.Pizza{ObjectMeta: meta}),
	Entry("every field",
		&v1alpha1.Pizza{ObjectMeta: meta, Spec: v1alpha1.PizzaSpec{Sauce: "pesto", Size: "large", Toppings: []string{"a", "b"}},
			Status: v1alpha1.PizzaStatus{ObservedGeneration: 3, Conditions: conditions}},
		&v1beta1.Pizza{ObjectMeta: meta, Spec: v1beta1.PizzaSpec{Base: "pesto", Size: "large", Crust: "thin",
			Toppings: []v1beta1.Topping{{Name: "a", Extra: true}}}, Status: v1beta1.PizzaStatus{Conditions: conditions}}),
	Entry("empty, not nil, toppings",
		&v1alpha1.Pizza{ObjectMeta: meta, Spec: v1alpha1.PizzaSpec{Toppings: []string{}}},
		&v1beta1.Pizza{ObjectMeta: meta, Spec: v1beta1.PizzaSpec{Toppings: []v1beta1.Topping{}}}),
	Entry("annotations of the user",
		&v1alpha1.Pizza{ObjectMeta: metav1.ObjectMeta{Name: "z", Annotations: map[string]string{"note": "well done"}}},
		&v1beta1.Pizza{ObjectMeta: metav1.ObjectMeta{Name: "z", Annotations: map[string]string{"note": "well done"}}}),
)

// filler builds random Pizzas from a fuzzer's seed. Our own annotation is
// removed: a user who writes it by hand opts out of the guarantee.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 4)
}

// normalize removes what conversions do not own: the stash annotation, and
// TypeMeta, which the webhook sets from the requested version.
func normalize(t *metav1.TypeMeta, m *metav1.ObjectMeta) {
	*t = metav1.TypeMeta{}
	delete(m.Annotations, pizzaconversion.DataAnnotation)
}

func FuzzHubRoundTrip(f *testing.F) {
	for _, seed := range []int64{0, 1, 2, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		g := NewWithT(t)
		var hub v1.Pizza
		filler(seed).Fill(&hub)
		normalize(&hub.TypeMeta, &hub.ObjectMeta)
		var alpha v1alpha1.Pizza
		g.Expect(alpha.ConvertFrom(hub.DeepCopy())).To(Succeed())
		var viaAlpha v1.Pizza
		g.Expect(alpha.ConvertTo(&viaAlpha)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(&viaAlpha, &hub)).To(BeTrue(), "through v1alpha1 (-got +want):\n%s", cmp.Diff(&viaAlpha, &hub))

		var beta v1beta1.Pizza
		g.Expect(beta.ConvertFrom(hub.DeepCopy())).To(Succeed())
		var viaBeta v1.Pizza
		g.Expect(beta.ConvertTo(&viaBeta)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(&viaBeta, &hub)).To(BeTrue(), "through v1beta1 (-got +want):\n%s", cmp.Diff(&viaBeta, &hub))
	})
}

func FuzzV1alpha1RoundTrip(f *testing.F) {
	for _, seed := range []int64{0, 1, 2, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		g := NewWithT(t)
		var alpha v1alpha1.Pizza
		filler(seed).Fill(&alpha)
		normalize(&alpha.TypeMeta, &alpha.ObjectMeta)
		var hub v1.Pizza
		g.Expect(alpha.DeepCopy().ConvertTo(&hub)).To(Succeed())
		var back v1alpha1.Pizza
		g.Expect(back.ConvertFrom(&hub)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(&back, &alpha)).To(BeTrue(), "(-got +want):\n%s", cmp.Diff(&back, &alpha))
	})
}

func FuzzV1beta1RoundTrip(f *testing.F) {
	for _, seed := range []int64{0, 1, 2, 42, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		g := NewWithT(t)
		var beta v1beta1.Pizza
		filler(seed).Fill(&beta)
		normalize(&beta.TypeMeta, &beta.ObjectMeta)
		var hub v1.Pizza
		g.Expect(beta.DeepCopy().ConvertTo(&hub)).To(Succeed())
		var back v1beta1.Pizza
		g.Expect(back.ConvertFrom(&hub)).To(Succeed())
		g.Expect(equality.Semantic.DeepEqual(&back, &beta)).To(BeTrue(), "(-got +want):\n%s", cmp.Diff(&back, &beta))
	})
}
