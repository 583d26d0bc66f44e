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
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/migration"
)

func TestNextRun(t *testing.T) {
	created := metav1.NewTime(time.Unix(10, 0))
	prevStarted := metav1.NewTime(time.Unix(50, 0))
	done := metav1.NewTime(time.Unix(100, 0))
	started := metav1.NewTime(time.Unix(200, 0))
	prev := func(edit func(*graduatorv1alpha1.MigrationStatus)) *graduatorv1alpha1.MigrationStatus {
		r := &graduatorv1alpha1.MigrationStatus{
			CRDGeneration: 3, StorageVersion: "v2", ResourceVersion: "1000", WrittenRanges: "1001-1200", StartedAt: &prevStarted,
			ContinueToken: "abc", CatchUp: true, Listed: 50, Rewritten: 40, Failed: 10, CompletedAt: &done,
			Space: &graduatorv1alpha1.EtcdSpaceLedger{InUse: 40 << 20, Peak: 8 << 20},
		}
		if edit != nil {
			edit(r)
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		prev       *graduatorv1alpha1.MigrationStatus
		created    metav1.Time
		checkpoint string
		written    string
	}{
		{"no run before", nil, created, "", ""},
		{"a retry after failures keeps the checkpoint and the written ranges", prev(nil), created, "1000", "1001-1200"},
		{"an unfinished run interrupted by one edit of the CRD keeps them (a version added)",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration, r.CompletedAt, r.Failed = 2, nil, 0 }), created, "1000", "1001-1200"},
		{"a run completed before one edit of the CRD keeps them",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration, r.Failed = 2, 0 }), created, "1000", "1001-1200"},
		{"two edits of the CRD start afresh (the storage version may have been set back and forward)",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration, r.CompletedAt = 1, nil }), created, "", ""},
		{"a CRD created again since the run started starts afresh",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration, r.CompletedAt = 2, nil }), metav1.NewTime(time.Unix(60, 0)), "", ""},
		{"a CRD created in the second the run started starts afresh",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CRDGeneration, r.CompletedAt = 2, nil }), prevStarted, "", ""},
		{"another storage version starts afresh",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.StorageVersion = "v1" }), created, "", ""},
		{"another storage version, one edit later, starts afresh",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.StorageVersion, r.CRDGeneration = "v1", 2 }), created, "", ""},
		{"a run with no checkpoint yet has none to keep",
			prev(func(r *graduatorv1alpha1.MigrationStatus) { r.ResourceVersion, r.CRDGeneration = "", 2 }), created, "", ""},
		{"an unfinished run is resumed, not retried", prev(func(r *graduatorv1alpha1.MigrationStatus) { r.CompletedAt = nil }), created, "", ""},
		{"a clean run is not retried", prev(func(r *graduatorv1alpha1.MigrationStatus) { r.Failed = 0 }), created, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Generation: 3, CreationTimestamp: tc.created}}
			got := nextRun(tc.prev, crd, "v2", &started)
			if got.ResourceVersion != tc.checkpoint || got.WrittenRanges != tc.written {
				t.Errorf("checkpoint %q, written %q; want %q, %q", got.ResourceVersion, got.WrittenRanges, tc.checkpoint, tc.written)
			}
			if got.CRDGeneration != 3 || got.StorageVersion != "v2" || got.StartedAt != &started || got.ContinueToken != "" ||
				got.CatchUp || got.Listed != 0 || got.Failed != 0 || got.CompletedAt != nil {
				t.Errorf("a new run must start its pass and counts afresh: %+v", got)
			}
			if tc.prev != nil && (got.Space == nil || *got.Space != *tc.prev.Space) {
				t.Errorf("space %+v; want the last run's %+v kept: it is etcd's, whatever the CRD did", got.Space, tc.prev.Space)
			}
		})
	}
}

// What a run's writes did to etcd's space travels through the policy
// status: a resumed run follows it.
func TestSpaceLedgerSurvivesTheStatus(t *testing.T) {
	for _, l := range []migration.SpaceLedger{
		{},
		{InUse: 40 << 20, Peak: 8 << 20},
		{InUse: 40 << 20, Peak: 8 << 20, Outstanding: 3 << 20, Revision: 123456789},
	} {
		if got := ledgerOf(ledgerStatus(l)); got != l {
			t.Errorf("through the status %+v came back as %+v", l, got)
		}
	}
	if ledgerStatus(migration.SpaceLedger{}) != nil {
		t.Error("no ledger: no status field")
	}
}

// The sweep's way travels through the policy status (the CLI reads its
// result from there): what the engine said is what the status gives back.
func TestSweepSurvivesTheStatus(t *testing.T) {
	long := strings.Repeat("x", 600)
	for _, tc := range []struct {
		name           string
		mode           migration.SweepMode
		reason         string
		status         string
		wantMode       migration.SweepMode
		wantReasonHead string
	}{
		{"not started", "", "", "", "", ""},
		{"watch", migration.SweepWatch, "the watch from the checkpoint saw every write up to revision 9",
			"watch: the watch from the checkpoint saw every write up to revision 9", migration.SweepWatch, "the watch from"},
		{"list, a reason with a colon", migration.SweepList, "no permission to watch: forbidden",
			"list: no permission to watch: forbidden", migration.SweepList, "no permission to watch: forbidden"},
		{"a long reason is cut to the field's bound", migration.SweepList, long, "", migration.SweepList, "xxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sweepOf(migration.Progress{SweepMode: tc.mode, SweepReason: tc.reason})
			if tc.status != "" && got != tc.status {
				t.Errorf("sweepOf = %q, want %q", got, tc.status)
			}
			if len(got) > maxSweep {
				t.Errorf("sweepOf is %d bytes, more than the status field's %d", len(got), maxSweep)
			}
			mode, reason := sweepFrom(got)
			if mode != tc.wantMode || !strings.HasPrefix(reason, tc.wantReasonHead) {
				t.Errorf("sweepFrom(%q) = %q, %q; want %q, %q...", got, mode, reason, tc.wantMode, tc.wantReasonHead)
			}
		})
	}
}

func TestWriteVersions(t *testing.T) {
	crd := func(strategy apiextensionsv1.ConversionStrategyType, stored []string, served map[string]bool, status ...string) *apiextensionsv1.CustomResourceDefinition {
		c := &apiextensionsv1.CustomResourceDefinition{}
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
		for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
			version := apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: served[v], Storage: v == "v1"}
			if slices.Contains(status, v) {
				version.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
			}
			c.Spec.Versions = append(c.Spec.Versions, version)
		}
		c.Status.StoredVersions = stored
		return c
	}
	all := map[string]bool{"v1alpha1": true, "v1beta1": true, "v1": true}
	tests := []struct {
		name    string
		crd     *apiextensionsv1.CustomResourceDefinition
		writeTo graduatorv1alpha1.WriteTarget
		want    []string
	}{
		{"a webhook and one old version: it", crd(apiextensionsv1.WebhookConverter, []string{"v1beta1", "v1"}, all), "", []string{"v1beta1"}},
		{"no conversion: nothing to gain", crd(apiextensionsv1.NoneConverter, []string{"v1beta1", "v1"}, all), "", nil},
		{"two old versions: a write at one could convert through it", crd(apiextensionsv1.WebhookConverter, []string{"v1alpha1", "v1beta1", "v1"}, all), "", nil},
		{"the old version is not served", crd(apiextensionsv1.WebhookConverter, []string{"v1beta1", "v1"}, map[string]bool{"v1": true}), "", nil},
		{"writes to /status, which the old version lacks", crd(apiextensionsv1.WebhookConverter, []string{"v1beta1", "v1"}, all, "v1"), graduatorv1alpha1.WriteToStatus, nil},
		{"writes to /status, which both versions have", crd(apiextensionsv1.WebhookConverter, []string{"v1beta1", "v1"}, all, "v1beta1", "v1"), graduatorv1alpha1.WriteToStatus, []string{"v1beta1"}},
		{"nothing stored elsewhere", crd(apiextensionsv1.WebhookConverter, []string{"v1"}, all), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeVersions(tt.crd, "v1", tt.writeTo); !slices.Equal(got, tt.want) {
				t.Errorf("writeVersions = %v, want %v", got, tt.want)
			}
		})
	}
	if got := writeVersions(&apiextensionsv1.CustomResourceDefinition{}, "v1", ""); got != nil {
		t.Errorf("writeVersions of a CRD without spec.conversion = %v, want none", got)
	}
}
