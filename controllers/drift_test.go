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

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graduator/graduator/internal/graduation"
)

func TestDriftOfACRDTheInTreeMigratorMigratesIsShownAsSuch(t *testing.T) {
	crd := func(conditions ...apiextensionsv1.CustomResourceDefinitionCondition) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Generation: 3},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true}, {Name: "v2", Served: true, Storage: true}},
			},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1", "v2"}, Conditions: conditions},
		}
	}
	migrating := func(generation int64) apiextensionsv1.CustomResourceDefinitionCondition {
		return apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.StorageMigrating, Status: apiextensionsv1.ConditionTrue, ObservedGeneration: generation,
		}
	}
	for _, tc := range []struct {
		name                  string
		crd                   *apiextensionsv1.CustomResourceDefinition
		eventType, reason, in string
	}{
		{"no in-tree migration: a warning to act", crd(), corev1.EventTypeWarning, "StaleStoredVersions", "graduator migrate widgets.example.com"},
		{"the in-tree migrator migrates it: said so, nothing to do", crd(migrating(3)), corev1.EventTypeNormal,
			graduation.ReasonInTreeMigrationRunning, "in-tree StorageVersionMigration is migrating widgets.example.com"},
		{"a StorageMigrating condition of an older generation is stale", crd(migrating(2)), corev1.EventTypeWarning,
			"StaleStoredVersions", "graduator migrate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eventType, reason, message := driftReport(tc.crd, []string{"v1"})
			if eventType != tc.eventType || reason != tc.reason || !strings.Contains(message, tc.in) {
				t.Errorf("driftReport = %s %s %q, want %s %s containing %q", eventType, reason, message, tc.eventType, tc.reason, tc.in)
			}
		})
	}
}
