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

package driver

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

func TestNextRun(t *testing.T) {
	done := metav1.NewTime(time.Unix(100, 0))
	started := metav1.NewTime(time.Unix(200, 0))
	prev := func(edit func(*graduatorv1alpha1.MigrationStatus)) *graduatorv1alpha1.MigrationStatus {
		r := &graduatorv1alpha1.MigrationStatus{
			CRDGeneration: 3, StorageVersion: "v2", ResourceVersion: "1000", WrittenRanges: "1001-1200",
			ContinueToken: "abc", CatchUp: true, Listed: 50, Rewritten: 40, Failed: 10, CompletedAt: &done,
		}
		if edit != nil {
			edit(r)
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		prev       *graduatorv1alpha1.MigrationStatus
		checkpoint string
		written    string
	}{
		{"no run before", nil, "", ""},
		{"a retry after failures keeps the checkpoint and the written ranges", prev(nil), "1000", "1001-1200"},
		{"another CRD generation starts afresh", prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration = 2 }), "", ""},
		{"another storage version starts afresh", prev(func(r *graduatorv1alpha1.MigrationStatus) { r.StorageVersion = "v1" }), "", ""},
		{"an unfinished run is resumed, not retried", prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CompletedAt = nil }), "", ""},
		{"a clean run is not retried", prev(func(r *graduatorv1alpha1.MigrationStatus) { r.Failed = 0 }), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nextRun(tc.prev, 3, "v2", &started)
			if got.ResourceVersion != tc.checkpoint || got.WrittenRanges != tc.written {
				t.Errorf("checkpoint %q, written %q; want %q, %q", got.ResourceVersion, got.WrittenRanges, tc.checkpoint, tc.written)
			}
			if got.CRDGeneration != 3 || got.StorageVersion != "v2" || got.StartedAt != &started || got.ContinueToken != "" ||
				got.CatchUp || got.Listed != 0 || got.Failed != 0 || got.CompletedAt != nil {
				t.Errorf("a new run must start its pass and counts afresh: %+v", got)
			}
		})
	}
}
