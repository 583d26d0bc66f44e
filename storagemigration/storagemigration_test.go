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
	"strings"
	"testing"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graduator/graduator/storagemigration"
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
