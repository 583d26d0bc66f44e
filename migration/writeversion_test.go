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

package migration

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWriteVersion(t *testing.T) {
	at := func(apiVersions ...string) []metav1.ManagedFieldsEntry {
		entries := make([]metav1.ManagedFieldsEntry, len(apiVersions))
		for i, v := range apiVersions {
			entries[i] = metav1.ManagedFieldsEntry{Manager: "m", APIVersion: v}
		}
		return entries
	}
	const alpha, beta, storage = "example.com/v1alpha1", "example.com/v1beta1", "v1"
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		old     []string
		want    string
	}{
		{"no entries: nothing to gain", nil, []string{"v1alpha1"}, storage},
		{"no old version allowed (no conversion webhook, or not proven)", at(alpha, alpha), nil, storage},
		{"every entry at the allowed old version", at(alpha, alpha), []string{"v1alpha1"}, "v1alpha1"},
		{"one entry at the allowed old version", at(alpha), []string{"v1alpha1"}, "v1alpha1"},
		{"an entry at the storage version: may hold what the old version cannot", at(alpha, alpha, "example.com/v1"), []string{"v1alpha1"}, storage},
		{"every entry at the storage version", at("example.com/v1", "example.com/v1"), []string{"v1alpha1"}, storage},
		{"entries at two old versions", at(alpha, beta), []string{"v1alpha1", "v1beta1"}, storage},
		{"every entry at an old version not allowed", at(beta, beta), []string{"v1alpha1"}, storage},
		{"every entry at the second allowed old version", at(beta, beta), []string{"v1alpha1", "v1beta1"}, "v1beta1"},
		{"an apiVersion that does not parse", at("a/b/c", "a/b/c"), []string{"v1alpha1"}, storage},
		{"the core group's form", at("v1alpha1"), []string{"v1alpha1"}, "v1alpha1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeVersion(tt.entries, tt.old, storage); got != tt.want {
				t.Errorf("writeVersion = %q, want %q", got, tt.want)
			}
		})
	}
}
