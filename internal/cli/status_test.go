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
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

func TestStatusRowsShowWhyAndHideNothing(t *testing.T) {
	crd := apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "pizzas.restaurant.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1alpha1", Served: true}, {Name: "v1beta1", Served: true, Storage: true},
		}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1alpha1", "v1beta1"}},
	}
	stalled := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
		Status: graduatorv1alpha1.CRDVersionPolicyStatus{Phase: graduatorv1alpha1.PhaseMigrating, Conditions: []metav1.Condition{{
			Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ConversionFailed",
			Message: "Migrate failed (attempt 2): conversion webhook ...; retrying in 10s",
		}}},
	}
	orphan := &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gone.example.com"}}
	rows := statusRows([]apiextensionsv1.CustomResourceDefinition{crd},
		map[string]*graduatorv1alpha1.CRDVersionPolicy{crd.Name: stalled, orphan.Name: orphan},
		map[string]error{"broken.example.com": errors.New(`json: cannot unmarshal string into Go struct field .spec.paused of type bool`)})

	if len(rows) != 3 {
		t.Fatalf("want a row for the CRD, the policy without a CRD and the unreadable policy, got %d: %+v", len(rows), rows)
	}
	byName := map[string]CRDStatus{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	if r := byName[crd.Name]; r.Reason != "ConversionFailed" || r.PolicyPhase != "Migrating" || len(r.Drift) != 1 {
		t.Errorf("the stalled policy's row: %+v", r)
	}
	if r := byName["broken.example.com"]; r.PolicyPhase != "Unreadable" || r.PolicyError == "" {
		t.Errorf("an undecodable policy is listed with its error: %+v", r)
	}
	if r := byName["gone.example.com"]; r.PolicyPhase != "Pending" {
		t.Errorf("a policy without its CRD is listed: %+v", r)
	}
	var out bytes.Buffer
	if err := printStatusTable(&out, rows, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"REASON", "ConversionFailed", "cannot decode the policy: json: cannot unmarshal"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

// The README's example row, in a migration, fits 120 columns by default;
// -o wide adds the stored, served and deprecated versions, the policy and
// the writers.
func TestTheStatusTableFits120ColumnsAndWideShowsTheRest(t *testing.T) {
	rows := []CRDStatus{{
		Name: "pizzas.restaurant.example.com", StorageVersion: "v1beta1", StoredVersions: []string{"v1alpha1", "v1beta1"},
		Served: []string{"v1alpha1", "v1beta1"}, Deprecated: []string{"v1alpha1"}, Drift: []string{"v1alpha1"},
		Policy: "pizzas.restaurant.example.com", PolicyPhase: "Migrating", Progress: "1450/3000 (48%)", Writers: 24, ETA: "5s",
		Reason: "ConversionFailed", InTree: []InTreeMigration{{Name: "graduator-pizzas.restaurant.example.com", Phase: "Running"}},
	}, {Name: "widgets.example.com", StorageVersion: "v1", StoredVersions: []string{"v1"}, Served: []string{"v1"}}}
	var narrow, wide bytes.Buffer
	if err := printStatusTable(&narrow, rows, false); err != nil {
		t.Fatal(err)
	}
	if err := printStatusTable(&wide, rows, true); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(narrow.String()), "\n") {
		if len(line) > 120 {
			t.Errorf("%d columns, want at most 120:\n%s", len(line), narrow.String())
		}
	}
	header := strings.Fields(strings.SplitN(narrow.String(), "\n", 2)[0])
	if want := []string{"CRD", "STORAGE", "DRIFT", "PHASE", "PROGRESS", "ETA", "IN-TREE", "REASON"}; strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("default columns %v, want %v", header, want)
	}
	header = strings.Fields(strings.SplitN(wide.String(), "\n", 2)[0])
	if want := []string{"CRD", "STORAGE", "STORED", "SERVED", "DEPRECATED", "DRIFT", "POLICY", "PHASE", "PROGRESS", "WRITERS", "ETA",
		"IN-TREE", "STORAGEVERSIONMIGRATIONS", "REASON"}; strings.Join(header, " ") != strings.Join(want, " ") {
		t.Errorf("wide columns %v, want %v", header, want)
	}
	if !strings.Contains(wide.String(), "24") {
		t.Errorf("wide shows the writers:\n%s", wide.String())
	}
}

func TestTheDescriptionOfAPolicyWithoutAPhaseSaysPending(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "pizzas.restaurant.example.com"}}
	var out bytes.Buffer
	if err := writeDescription(&out, crd, &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}, nil, nil,
		time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Policy:           pizzas.restaurant.example.com, phase Pending\n") {
		t.Errorf("as the table says, the phase is Pending:\n%s", out.String())
	}
}

func TestDescriptionSaysWhyAGraduationIsBlocked(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "pizzas.restaurant.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1alpha1", Served: true}, {Name: "v1beta1", Served: true, Storage: true},
		}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1alpha1", "v1beta1"}},
	}
	policy := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name},
		Status: graduatorv1alpha1.CRDVersionPolicyStatus{
			Phase: graduatorv1alpha1.PhaseMigrating, Retries: 2,
			Migration: &graduatorv1alpha1.MigrationStatus{StorageVersion: "v1beta1", Listed: 500, Rewritten: 450, Failed: 1, Writers: 12,
				Failures: []graduatorv1alpha1.MigrationFailure{{Namespace: "default", Name: "frozen", Reason: "admission webhook denied"}}},
			Conditions: []metav1.Condition{{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ConversionFailed",
				Message: "Migrate failed (attempt 2): conversion webhook ...; retrying in 10s"}},
		},
	}
	events := []corev1.Event{
		{Type: "Warning", Reason: "ConversionFailed", Message: "Migrate failed (attempt 1)", LastTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		{Type: "Normal", Reason: "MigrationStarted", Message: "rewriting every pizzas", LastTimestamp: metav1.NewTime(now.Add(-5 * time.Minute))},
	}
	var out bytes.Buffer
	if err := writeDescription(&out, crd, policy, events,
		[]InTreeMigration{{Name: "graduator-pizzas.restaurant.example.com", Phase: "Failed"}}, now); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Drift:            objects may still be stored as v1alpha1",
		"phase Migrating", "2 failed attempts in a row", "450 rewritten", "12 writers",
		"failed: default/frozen: admission webhook denied",
		"ConversionFailed", "retrying in 10s", "MigrationStarted", "5m",
		"In-tree:          StorageVersionMigrations graduator-pizzas.restaurant.example.com (Failed)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the description lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "MigrationStarted") > strings.Index(text, "Migrate failed (attempt 1)") {
		t.Errorf("events are oldest first:\n%s", text)
	}
}

func TestProgressAndETAOfARunningMigration(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-45 * time.Second))
	run := &graduatorv1alpha1.MigrationStatus{Listed: 500, Rewritten: 440, Skipped: 5, Failed: 5, StartedAt: &started}
	for _, tc := range []struct {
		name          string
		total         int64
		progress, eta string
	}{
		{"the total unknown: counts alone", -1, "450/500", ""},
		{"1,000 objects: 45% done in 45s, 55s to go", 1000, "450/500 (45%)", "55s"},
		{"objects deleted meanwhile: never above 100%", 400, "450/500 (100%)", "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			progress, eta := migrationProgress(run, tc.total, now)
			if progress != tc.progress || eta != tc.eta {
				t.Errorf("got %q, %q; want %q, %q", progress, eta, tc.progress, tc.eta)
			}
		})
	}
}

// Each CRD's row lists the in-tree migrations of its own resource, oldest
// first, whoever made them; the table shows their phases, -o wide their names.
func TestStatusShowsTheInTreeMigrationsOfEachCRD(t *testing.T) {
	crd := func(name, group, plural string) apiextensionsv1.CustomResourceDefinition {
		return apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1"}},
		}
	}
	crds := []apiextensionsv1.CustomResourceDefinition{
		crd("pizzas.restaurant.example.com", "restaurant.example.com", "pizzas"), crd("widgets.example.com", "example.com", "widgets"),
	}
	svm := func(name, group, plural string, age time.Duration, cond svmv1.MigrationConditionType) svmv1.StorageVersionMigration {
		m := svmv1.StorageVersionMigration{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).Add(-age))},
			Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: group, Resource: plural}},
		}
		if cond != "" {
			m.Status.Conditions = []metav1.Condition{{Type: string(cond), Status: metav1.ConditionTrue}}
		}
		return m
	}
	rows := statusRows(crds, nil, nil)
	addInTree(rows, crds, []svmv1.StorageVersionMigration{
		svm("by-hand", "restaurant.example.com", "pizzas", 2*time.Hour, svmv1.MigrationFailed),
		svm("graduator-pizzas.restaurant.example.com", "restaurant.example.com", "pizzas", time.Hour, ""),
		svm("other-group-same-plural", "other.example.com", "pizzas", time.Hour, svmv1.MigrationSucceeded),
	})
	want := []InTreeMigration{{Name: "by-hand", Phase: "Failed"}, {Name: "graduator-pizzas.restaurant.example.com", Phase: "Running"}}
	if diff := cmp.Diff(want, rows[0].InTree); diff != "" {
		t.Errorf("pizzas' in-tree migrations (-want +got):\n%s", diff)
	}
	if rows[1].InTree != nil {
		t.Errorf("widgets has none: %+v", rows[1].InTree)
	}
	var narrow, wide bytes.Buffer
	if err := printStatusTable(&narrow, rows, false); err != nil {
		t.Fatal(err)
	}
	if err := printStatusTable(&wide, rows, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(narrow.String(), "Failed,Running") {
		t.Errorf("the table shows the phases:\n%s", narrow.String())
	}
	if !strings.Contains(wide.String(), "by-hand:Failed,graduator-pizzas.restaurant.example.com:Running") {
		t.Errorf("-o wide shows the names:\n%s", wide.String())
	}
}
