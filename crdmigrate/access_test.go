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

package crdmigrate

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestForbiddenNamesEveryMissingRightAndItsRule(t *testing.T) {
	err := &Forbidden{Missing: []authorizationv1.ResourceAttributes{
		{Verb: "list", Group: "batch.example.com", Resource: "jobs"},
		{Verb: "patch", Group: "batch.example.com", Resource: "jobs"},
		{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Subresource: "status"},
	}}
	want := `not allowed to list jobs.batch.example.com, patch jobs.batch.example.com, ` +
		`patch customresourcedefinitions.apiextensions.k8s.io/status; grant the manager's ServiceAccount the rules ` +
		`{apiGroups: ["batch.example.com"], resources: ["*"], verbs: ["get", "list", "patch"]} and ` +
		`{apiGroups: ["apiextensions.k8s.io"], resources: ["customresourcedefinitions/status"], verbs: ["patch"]}; nothing was changed`
	if got := err.Error(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !apierrors.IsForbidden(err) {
		t.Fatal("Forbidden is not recognized as a 403")
	}
}
