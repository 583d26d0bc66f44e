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

package v1alpha1

import (
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	pizzaconversion "github.com/graduator/graduator/conversion"
	v1 "github.com/graduator/graduator/conversion/v1"
)

// lostFields are the v1 fields v1alpha1 cannot hold.
type lostFields struct {
	Crust    string            `json:"crust,omitempty"`
	Delivery *v1.Delivery      `json:"delivery,omitempty"`
	Toppings []lostToppingBits `json:"toppings,omitempty"`
}

// lostToppingBits are the parts of a topping beyond its name, by position.
type lostToppingBits struct {
	Name  string `json:"name"`
	Extra bool   `json:"extra,omitempty"`
	Grams *int32 `json:"grams,omitempty"`
}

// ConvertTo converts this Pizza to the hub version, v1.
func (src *Pizza) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1.Pizza)
	if !ok {
		return fmt.Errorf("v1alpha1 Pizza converts to *v1.Pizza, not %T", dstRaw)
	}
	var lost lostFields
	annotations, _, err := pizzaconversion.Unstash(src.Annotations, &lost)
	if err != nil {
		return fmt.Errorf("convert Pizza %s/%s to v1: %w", src.Namespace, src.Name, err)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = annotations

	dst.Spec = v1.PizzaSpec{Base: src.Spec.Sauce, Size: src.Spec.Size, Crust: lost.Crust, Delivery: lost.Delivery}
	if src.Spec.Toppings != nil {
		dst.Spec.Toppings = make([]v1.Topping, len(src.Spec.Toppings))
		for i, name := range src.Spec.Toppings {
			t := v1.Topping{Name: name}
			// Restore by position, only while the name still matches: a
			// topping added or removed through v1alpha1 loses its extras.
			if i < len(lost.Toppings) && lost.Toppings[i].Name == name {
				t.Extra, t.Grams = lost.Toppings[i].Extra, lost.Toppings[i].Grams
			}
			dst.Spec.Toppings[i] = t
		}
	}
	dst.Status = v1.PizzaStatus{ObservedGeneration: src.Status.ObservedGeneration, Conditions: slices.Clone(src.Status.Conditions)}
	return nil
}

// ConvertFrom converts the hub version, v1, to this Pizza.
func (dst *Pizza) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1.Pizza)
	if !ok {
		return fmt.Errorf("v1alpha1 Pizza converts from *v1.Pizza, not %T", srcRaw)
	}
	lost := lostFields{Crust: src.Spec.Crust, Delivery: src.Spec.Delivery}
	nothingLost := lost.Crust == "" && lost.Delivery == nil
	dst.Spec = PizzaSpec{Sauce: src.Spec.Base, Size: src.Spec.Size}
	if src.Spec.Toppings != nil {
		dst.Spec.Toppings = make([]string, len(src.Spec.Toppings))
		keepBits := false
		for i, t := range src.Spec.Toppings {
			dst.Spec.Toppings[i] = t.Name
			keepBits = keepBits || t.Extra || t.Grams != nil
		}
		if keepBits {
			nothingLost = false
			for _, t := range src.Spec.Toppings {
				lost.Toppings = append(lost.Toppings, lostToppingBits{Name: t.Name, Extra: t.Extra, Grams: t.Grams})
			}
		}
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	annotations, err := pizzaconversion.Stash(src.Annotations, lost, nothingLost)
	if err != nil {
		return fmt.Errorf("convert Pizza %s/%s to v1alpha1: %w", src.Namespace, src.Name, err)
	}
	dst.Annotations = annotations
	dst.Status = PizzaStatus{ObservedGeneration: src.Status.ObservedGeneration, Conditions: slices.Clone(src.Status.Conditions)}
	return nil
}
