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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PizzaSpec is the order.
type PizzaSpec struct {
	// Base is the sauce spread on the dough (spec.sauce in v1alpha1).
	// +kubebuilder:validation:Enum=tomato;cream;pesto
	// +kubebuilder:default=tomato
	Base string `json:"base"`

	// Toppings, in the order they go on.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	Toppings []Topping `json:"toppings,omitempty"`

	// Size of the pizza.
	// +kubebuilder:validation:Enum=small;medium;large
	// +kubebuilder:default=medium
	Size string `json:"size"`

	// Crust of the pizza.
	// +optional
	// +kubebuilder:validation:Enum=thin;thick;stuffed
	Crust string `json:"crust,omitempty"`
}

// Topping is one topping.
type Topping struct {
	// Name of the topping.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// Extra asks for a double portion.
	// +optional
	Extra bool `json:"extra,omitempty"`
}

// PizzaStatus is what the kitchen observed.
type PizzaStatus struct {
	// ObservedGeneration is the spec generation the kitchen last saw.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions of the order, such as Baked.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Pizza is an order for one pizza.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Base",type=string,JSONPath=`.spec.base`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`
type Pizza struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PizzaSpec   `json:"spec,omitempty"`
	Status PizzaStatus `json:"status,omitempty"`
}

// PizzaList is a list of Pizza.
//
// +kubebuilder:object:root=true
type PizzaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pizza `json:"items"`
}
