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

package v1beta1

import (
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	pizzaconversion "github.com/graduator/graduator/conversion"
	v1 "github.com/graduator/graduator/conversion/v1"
)

// lostFields are the v1 fields v1beta1 cannot hold.
type lostFields struct {
	Delivery *v1.Delivery `json:"delivery,omitempty"`
	// Grams of each topping, by position, with its name to detect edits.
	Grams []lostGrams `json:"grams,omitempty"`
}

type lostGrams struct {
	Name  string `json:"name"`
	Grams *int32 `json:"grams,omitempty"`
}

// ConvertTo converts this Pizza to the hub version, v1.
func (src *Pizza) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1.Pizza)
	if !ok {
		return fmt.Errorf("v1beta1 Pizza converts to *v1.Pizza, not %T", dstRaw)
	}
	var lost lostFields
	annotations, _, err := pizzaconversion.Unstash(src.Annotations, &lost)
	if err != nil {
		return fmt.Errorf("convert Pizza %s/%s to v1: %w", src.Namespace, src.Name, err)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Annotations = annotations

	dst.Spec = v1.PizzaSpec{Base: src.Spec.Base, Size: src.Spec.Size, Crust: src.Spec.Crust, Delivery: lost.Delivery}
	if src.Spec.Toppings != nil {
		dst.Spec.Toppings = make([]v1.Topping, len(src.Spec.Toppings))
		for i, t := range src.Spec.Toppings {
			hub := v1.Topping{Name: t.Name, Extra: t.Extra}
			if i < len(lost.Grams) && lost.Grams[i].Name == t.Name {
				hub.Grams = lost.Grams[i].Grams
			}
			dst.Spec.Toppings[i] = hub
		}
	}
	dst.Status = v1.PizzaStatus{ObservedGeneration: src.Status.ObservedGeneration, Conditions: slices.Clone(src.Status.Conditions)}
	return nil
}

// ConvertFrom converts the hub version, v1, to this Pizza.
func (dst *Pizza) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1.Pizza)
	if !ok {
		return fmt.Errorf("v1beta1 Pizza converts from *v1.Pizza, not %T", srcRaw)
	}
	lost := lostFields{Delivery: src.Spec.Delivery}
	nothingLost := lost.Delivery == nil
	dst.Spec = PizzaSpec{Base: src.Spec.Base, Size: src.Spec.Size, Crust: src.Spec.Crust}
	if src.Spec.Toppings != nil {
		dst.Spec.Toppings = make([]Topping, len(src.Spec.Toppings))
		keepGrams := false
		for i, t := range src.Spec.Toppings {
			dst.Spec.Toppings[i] = Topping{Name: t.Name, Extra: t.Extra}
			keepGrams = keepGrams || t.Grams != nil
		}
		if keepGrams {
			nothingLost = false
			for _, t := range src.Spec.Toppings {
				lost.Grams = append(lost.Grams, lostGrams{Name: t.Name, Grams: t.Grams})
			}
		}
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	annotations, err := pizzaconversion.Stash(src.Annotations, lost, nothingLost)
	if err != nil {
		return fmt.Errorf("convert Pizza %s/%s to v1beta1: %w", src.Namespace, src.Name, err)
	}
	dst.Annotations = annotations
	dst.Status = PizzaStatus{ObservedGeneration: src.Status.ObservedGeneration, Conditions: slices.Clone(src.Status.Conditions)}
	return nil
}
