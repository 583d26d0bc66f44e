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
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCachedCRDsKeepWhatThePlanReadsAndDropTheSchemas(t *testing.T) {
	big := strings.Repeat("x", 100_000)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:          "widgets.example.com",
			Generation:    7,
			Annotations:   map[string]string{lastApplied: big, "team": "platform"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true, Deprecated: true,
			Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Description: big}},
			Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age"}},
		}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
	}
	out, err := stripCRD(crd)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*apiextensionsv1.CustomResourceDefinition)
	v := got.Spec.Versions[0]
	if v.Schema != nil || v.AdditionalPrinterColumns != nil || got.ManagedFields != nil {
		t.Errorf("the schema, printer columns and managedFields are dropped: %+v", v)
	}
	if _, ok := got.Annotations[lastApplied]; ok || got.Annotations["team"] != "platform" {
		t.Errorf("only the last-applied annotation is dropped: %v", got.Annotations)
	}
	if !v.Served || !v.Storage || !v.Deprecated || v.Subresources == nil || got.Generation != 7 || got.Status.StoredVersions[0] != "v1" {
		t.Errorf("what the drift reporter and the event handlers read is kept: %+v", got)
	}
	if other, _ := stripCRD("not a CRD"); other != "not a CRD" {
		t.Errorf("other objects pass through")
	}
}
