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

package controllers

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

func TestSelects(t *testing.T) {
	crd := func(group string, labels map[string]string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group}}
	}
	team := map[string]string{"team": "platform"}
	for _, tc := range []struct {
		name string
		sel  *graduatorv1alpha1.CRDSelector
		crd  *apiextensionsv1.CustomResourceDefinition
		want bool
	}{
		{"exact group", &graduatorv1alpha1.CRDSelector{Groups: []string{"gateway.networking.k8s.io"}}, crd("gateway.networking.k8s.io", nil), true},
		{"another group", &graduatorv1alpha1.CRDSelector{Groups: []string{"gateway.networking.k8s.io"}}, crd("networking.k8s.io", nil), false},
		{"a subgroup of a wildcard", &graduatorv1alpha1.CRDSelector{Groups: []string{"*.crossplane.io"}}, crd("aws.upbound.crossplane.io", nil), true},
		{"a wildcard does not match its own root", &graduatorv1alpha1.CRDSelector{Groups: []string{"*.crossplane.io"}}, crd("crossplane.io", nil), false},
		{"a wildcard does not match a longer suffix", &graduatorv1alpha1.CRDSelector{Groups: []string{"*.crossplane.io"}}, crd("notcrossplane.io", nil), false},
		{"labels", &graduatorv1alpha1.CRDSelector{MatchLabels: team}, crd("x.io", team), true},
		{"labels missing", &graduatorv1alpha1.CRDSelector{MatchLabels: team}, crd("x.io", nil), false},
		{"group and labels must both match", &graduatorv1alpha1.CRDSelector{Groups: []string{"x.io"}, MatchLabels: team}, crd("x.io", nil), false},
		{"an expression", &graduatorv1alpha1.CRDSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"platform", "data"}}}}, crd("x.io", team), true},
		{"an empty selector selects nothing", &graduatorv1alpha1.CRDSelector{}, crd("x.io", team), false},
		{"no selector selects nothing", nil, crd("x.io", team), false},
	} {
		if got := selects(tc.sel, tc.crd); got != tc.want {
			t.Errorf("%s: selects = %t, want %t", tc.name, got, tc.want)
		}
	}
}
