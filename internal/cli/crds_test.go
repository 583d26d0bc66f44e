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

package cli

import (
	"context"
	"fmt"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

func crdNamed(name string) apiextensionsv1.CustomResourceDefinition {
	return apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
		}}},
	}
}

func TestTheCRDListingKeepsSchemasOnlyWhenAsked(t *testing.T) {
	for _, schemas := range []bool{false, true} {
		c := apiextensionsfake.NewClientset()
		c.PrependReactor("list", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, &apiextensionsv1.CustomResourceDefinitionList{Items: []apiextensionsv1.CustomResourceDefinition{crdNamed("a.example.com")}}, nil
		})
		crds, err := listCRDs(context.Background(), c, schemas)
		if err != nil {
			t.Fatal(err)
		}
		if len(crds) != 1 {
			t.Fatalf("schemas %t: want one CRD, got %d", schemas, len(crds))
		}
		crd := crds[0]
		if crd.Annotations != nil || crd.ManagedFields != nil {
			t.Errorf("schemas %t: annotations and managedFields kept: %v %v", schemas, crd.Annotations, crd.ManagedFields)
		}
		if got := crd.Spec.Versions[0].Schema != nil; got != schemas {
			t.Errorf("schemas %t: schema kept %t", schemas, got)
		}
		if !crd.Spec.Versions[0].Storage || crd.Spec.Versions[0].Name != "v1" {
			t.Errorf("schemas %t: the versions lost more than their schema: %+v", schemas, crd.Spec.Versions)
		}
	}
}

func TestTheCRDListingIsNeverNil(t *testing.T) {
	crds, err := listCRDs(context.Background(), apiextensionsfake.NewClientset(), false)
	if err != nil || crds == nil {
		t.Fatalf("want an empty list, got %v, %v", crds, err)
	}
}

// A listing whose continue token expired without a token to go on from
// starts again from the first page, and lists each CRD once.
func TestTheCRDListingStartedAgainListsEachCRDOnce(t *testing.T) {
	c := apiextensionsfake.NewClientset()
	calls := 0
	c.PrependReactor("list", "customresourcedefinitions", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		opts := a.(clienttesting.ListActionImpl).ListOptions
		if opts.Limit != crdPageSize {
			return true, nil, fmt.Errorf("want pages of %d, got a limit of %d", crdPageSize, opts.Limit)
		}
		switch {
		case opts.Continue == "":
			return true, &apiextensionsv1.CustomResourceDefinitionList{ListMeta: metav1.ListMeta{Continue: "page2"},
				Items: []apiextensionsv1.CustomResourceDefinition{crdNamed("a.example.com")}}, nil
		case calls == 2:
			return true, nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
		}
		return true, &apiextensionsv1.CustomResourceDefinitionList{
			Items: []apiextensionsv1.CustomResourceDefinition{crdNamed("b.example.com")}}, nil
	})
	crds, err := listCRDs(context.Background(), c, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	if fmt.Sprint(names) != "[a.example.com b.example.com]" {
		t.Errorf("want each CRD once, got %v (%d LISTs)", names, calls)
	}
}
