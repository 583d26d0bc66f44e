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

package storagemigration_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/graduator/graduator/internal/storagemigration"
)

func widgets(generation int64, conditions ...apiextensionsv1.CustomResourceDefinitionCondition) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: generation},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets"}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: conditions},
	}
}

func svm(name, group, resource string, conditions ...string) svmv1.StorageVersionMigration {
	s := svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: resource}}}
	for _, c := range conditions {
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
	}
	return s
}

func TestRunningFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		svms []svmv1.StorageVersionMigration
		want []string
	}{
		{"none", nil, nil},
		{"a new one, no condition yet, is running", []svmv1.StorageVersionMigration{svm("a", "example.com", "widgets")}, []string{"a"}},
		{"Running is running", []svmv1.StorageVersionMigration{svm("a", "example.com", "widgets", "Running")}, []string{"a"}},
		{"Succeeded and Failed are done", []svmv1.StorageVersionMigration{
			svm("a", "example.com", "widgets", "Running", "Succeeded"), svm("b", "example.com", "widgets", "Failed")}, nil},
		{"another resource or group does not count", []svmv1.StorageVersionMigration{
			svm("a", "example.com", "gadgets"), svm("b", "other.example.com", "widgets")}, nil},
		{"every running one, in list order", []svmv1.StorageVersionMigration{
			svm("a", "example.com", "widgets", "Failed"), svm("b", "example.com", "widgets"), svm("c", "example.com", "widgets", "Running")},
			[]string{"b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range storagemigration.RunningFor(widgets(1), tc.svms) {
				got = append(got, s.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("running %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCRDMigrating(t *testing.T) {
	cond := func(status apiextensionsv1.ConditionStatus, generation int64) apiextensionsv1.CustomResourceDefinitionCondition {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.StorageMigrating, Status: status,
			ObservedGeneration: generation}
	}
	for _, tc := range []struct {
		name string
		crd  *apiextensionsv1.CustomResourceDefinition
		want bool
	}{
		{"no condition", widgets(3), false},
		{"True at the current generation", widgets(3, cond(apiextensionsv1.ConditionTrue, 3)), true},
		{"True at an older generation: the run is stale", widgets(3, cond(apiextensionsv1.ConditionTrue, 2)), false},
		{"False", widgets(3, cond(apiextensionsv1.ConditionFalse, 3)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := storagemigration.CRDMigrating(tc.crd); got != tc.want {
				t.Errorf("CRDMigrating = %v, want %v", got, tc.want)
			}
		})
	}
}

// discoveryOf is a discovery client of an API server of the given release
// that serves the given group versions' resources.
func discoveryOf(release string, resources ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	fake := &clienttesting.Fake{Resources: resources}
	return &fakediscovery.FakeDiscovery{Fake: fake, FakedServerVersion: &version.Info{GitVersion: release}}
}

func TestServed(t *testing.T) {
	v1 := &metav1.APIResourceList{GroupVersion: "storagemigration.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "storageversionmigrations"}, {Name: "storageversionmigrations/status"}}}
	alpha := &metav1.APIResourceList{GroupVersion: "storagemigration.k8s.io/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "storageversionmigrations"}}}
	if err := storagemigration.Served(discoveryOf("v1.37.2", v1)); err != nil {
		t.Errorf("1.37 serving v1: %v, want nil", err)
	}
	for _, tc := range []struct {
		name  string
		disco *fakediscovery.FakeDiscovery
	}{
		{"1.30 without the group", discoveryOf("v1.30.14")},
		{"1.30 with v1alpha1 enabled", discoveryOf("v1.30.14", alpha)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := storagemigration.Served(tc.disco)
			unserved := storagemigration.Unserved(err)
			if unserved == nil {
				t.Fatalf("Served = %v, want an *UnservedError", err)
			}
			for _, part := range []string{"Kubernetes v1.30.14", "storagemigration.k8s.io/v1 ", "needs Kubernetes 1.37 or newer",
				"use engine Graduator"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("%q does not say %q", err, part)
				}
			}
		})
	}
}

func TestUnservedOfAClientsNoMatch(t *testing.T) {
	noKind := &meta.NoKindMatchError{GroupKind: svmv1.SchemeGroupVersion.WithKind("StorageVersionMigration").GroupKind(),
		SearchedVersions: []string{"v1"}}
	if got := storagemigration.Unserved(fmt.Errorf("get StorageVersionMigration x: %w", noKind)); got == nil ||
		!strings.Contains(got.Error(), "needs Kubernetes 1.37 or newer") {
		t.Errorf("Unserved(no kind match) = %v, want the release it needs", got)
	}
	other := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "example.com", Kind: "Widget"}}
	if got := storagemigration.Unserved(other); got != nil {
		t.Errorf("Unserved(another group's no match) = %v, want nil", got)
	}
	if got := storagemigration.Unserved(errors.New("boom")); got != nil {
		t.Errorf("Unserved(boom) = %v, want nil", got)
	}
}
