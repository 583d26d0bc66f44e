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

package access

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/graduator/graduator/migration"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}

// check renders a permission as "verb resource[/subresource]" for tables.
func check(a authorizationv1.ResourceAttributes) string {
	return fmt.Sprintf("%s %s", a.Verb, Describe(a))
}

func TestNeeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writeTo migration.WriteTarget
		want    []string
	}{
		{"writes to the object: list, get (judging a refused write) and patch", migration.WriteToObject,
			[]string{"list widgets.example.com", "get widgets.example.com", "patch widgets.example.com"}},
		{"the default target is the object", "",
			[]string{"list widgets.example.com", "get widgets.example.com", "patch widgets.example.com"}},
		{"writes to /status: also patch on the status subresource (managedFields cleanup still patches the object)",
			migration.WriteToStatus,
			[]string{"list widgets.example.com", "get widgets.example.com", "patch widgets.example.com",
				"patch widgets.example.com/status"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range Needs(widgets, tc.writeTo) {
				if a.Namespace != "" {
					t.Errorf("%s asks about namespace %q; a migration needs every namespace", check(a), a.Namespace)
				}
				if a.Version != "v2" {
					t.Errorf("%s asks about version %q, want v2", check(a), a.Version)
				}
				got = append(got, check(a))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Needs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writeTo migration.WriteTarget
		allowed func(authorizationv1.ResourceAttributes) bool
		// wantErr is the exact message; empty when allowed.
		wantErr string
	}{
		{"everything allowed: no error", migration.WriteToStatus,
			func(authorizationv1.ResourceAttributes) bool { return true }, ""},
		{"nothing allowed: the rule to add and the Helm value",
			migration.WriteToObject, func(authorizationv1.ResourceAttributes) bool { return false },
			`not allowed to list, get, patch widgets.example.com; add the rule {apiGroups: ["example.com"], resources: ["*"], ` +
				`verbs: ["get", "list", "patch"]} to a ClusterRole labelled graduator.io/aggregate-to-manager: "true" ` +
				`(with the Helm chart: --set rbac.migrateGroups={example.com}); nothing was changed`},
		{"only the status subresource missing: named alone",
			migration.WriteToStatus, func(a authorizationv1.ResourceAttributes) bool { return a.Subresource == "" },
			`not allowed to patch widgets.example.com/status; add the rule {apiGroups: ["example.com"], resources: ["*"], ` +
				`verbs: ["get", "list", "patch"]} to a ClusterRole labelled graduator.io/aggregate-to-manager: "true" ` +
				`(with the Helm chart: --set rbac.migrateGroups={example.com}); nothing was changed`},
		{"get missing (a list-and-patch-only role): named",
			migration.WriteToObject, func(a authorizationv1.ResourceAttributes) bool { return a.Verb != "get" },
			`not allowed to get widgets.example.com; add the rule {apiGroups: ["example.com"], resources: ["*"], ` +
				`verbs: ["get", "list", "patch"]} to a ClusterRole labelled graduator.io/aggregate-to-manager: "true" ` +
				`(with the Helm chart: --set rbac.migrateGroups={example.com}); nothing was changed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientset := fake.NewClientset()
			clientset.PrependReactor("create", "selfsubjectaccessreviews",
				func(action k8stesting.Action) (bool, runtime.Object, error) {
					review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
					review.Status.Allowed = tc.allowed(*review.Spec.ResourceAttributes)
					return true, review, nil
				})
			err := CheckNeeds(context.Background(), clientset.AuthorizationV1().SelfSubjectAccessReviews(), widgets, Needs(widgets, tc.writeTo))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check: nil, want %q", tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			var denied *Denied
			if !errors.As(err, &denied) {
				t.Errorf("Check returned %T, want *Denied", err)
			}
			if !apierrors.IsForbidden(err) {
				t.Errorf("apierrors.IsForbidden(%v) = false: the operator would not report reason Forbidden", err)
			}
		})
	}
}

func TestCheckReviewFails(t *testing.T) {
	clientset := fake.NewClientset()
	clientset.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	err := CheckNeeds(context.Background(), clientset.AuthorizationV1().SelfSubjectAccessReviews(), widgets, Needs(widgets, migration.WriteToObject))
	var denied *Denied
	if err == nil || errors.As(err, &denied) || !apierrors.IsServiceUnavailable(err) {
		t.Errorf("Check: %v; want the review's own error (503), not a denial", err)
	}
}

func TestCheckInTree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed func(authorizationv1.ResourceAttributes) bool
		wantErr string
	}{
		{"create, get, watch and delete allowed: no error",
			func(authorizationv1.ResourceAttributes) bool { return true }, ""},
		{"only delete missing (no recreate after a Failed run): named, with the rule and the chart value",
			func(a authorizationv1.ResourceAttributes) bool { return a.Verb != "delete" },
			`not allowed to delete storageversionmigrations.storagemigration.k8s.io, which engine StorageVersionMigration needs; ` +
				`add the rule {apiGroups: ["storagemigration.k8s.io"], resources: ["storageversionmigrations"], ` +
				`verbs: ["create", "get", "watch", "delete"]} to a ClusterRole labelled graduator.io/aggregate-to-manager: "true" ` +
				`(with the Helm chart: --set inTreeEngine.enabled=true); nothing was changed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			clientset := fake.NewClientset()
			clientset.PrependReactor("create", "selfsubjectaccessreviews",
				func(action k8stesting.Action) (bool, runtime.Object, error) {
					review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
					asked = append(asked, check(*review.Spec.ResourceAttributes))
					review.Status.Allowed = tc.allowed(*review.Spec.ResourceAttributes)
					return true, review, nil
				})
			err := CheckInTree(context.Background(), clientset.AuthorizationV1().SelfSubjectAccessReviews())
			want := []string{"create storageversionmigrations.storagemigration.k8s.io", "get storageversionmigrations.storagemigration.k8s.io",
				"watch storageversionmigrations.storagemigration.k8s.io", "delete storageversionmigrations.storagemigration.k8s.io"}
			if diff := cmp.Diff(want, asked); diff != "" {
				t.Errorf("reviews (-want +got):\n%s", diff)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckInTree: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckInTree: nil, want %q", tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if !apierrors.IsForbidden(err) {
				t.Errorf("apierrors.IsForbidden(%v) = false", err)
			}
		})
	}
}

func TestGrantNamesEveryMissingRightAndItsRule(t *testing.T) {
	denied := &Denied{
		Resource: schema.GroupVersionResource{Group: "batch.example.com", Version: "v1", Resource: "jobs"},
		Missing: []authorizationv1.ResourceAttributes{
			{Verb: "list", Group: "batch.example.com", Resource: "jobs"},
			{Verb: "patch", Group: "batch.example.com", Resource: "jobs"},
			{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Subresource: "status"},
			{Verb: "create", Group: "events.k8s.io", Resource: "events"},
		},
	}
	want := `not allowed to list, patch jobs.batch.example.com and patch customresourcedefinitions.apiextensions.k8s.io/status ` +
		`and create events.events.k8s.io; grant the manager's ServiceAccount the rules ` +
		`{apiGroups: ["batch.example.com"], resources: ["*"], verbs: ["get", "list", "patch"]} and ` +
		`{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions/status"], verbs: ["patch"]} and ` +
		`{apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"]}; nothing was changed`
	if got := denied.Grant(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !apierrors.IsForbidden(denied) {
		t.Fatal("Denied is not recognized as a 403")
	}
	only := &Denied{Resource: denied.Resource, Missing: denied.Missing[2:3]}
	if got, want := only.Grant(), `not allowed to patch customresourcedefinitions.apiextensions.k8s.io/status; grant the manager's `+
		`ServiceAccount the rules {apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions/status"], `+
		`verbs: ["patch"]}; nothing was changed`; got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
