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
	"github.com/graduator/graduator/internal/apiservers"
)

func TestTheShortSettleCountsFromTheFirstAgreementInARow(t *testing.T) {
	var a agreements
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	if got := a.observe("crd/v2", true, t0); !got.Equal(t0) {
		t.Fatalf("first agreement since %v, want %v", got, t0)
	}
	if got := a.observe("crd/v2", true, t0.Add(time.Second)); !got.Equal(t0) {
		t.Errorf("still agreeing: since %v, want %v", got, t0)
	}
	if got := a.observe("crd/v2", false, t0.Add(2*time.Second)); !got.IsZero() {
		t.Errorf("a server behind: since %v, want none", got)
	}
	if got := a.observe("crd/v2", true, t0.Add(3*time.Second)); !got.Equal(t0.Add(3 * time.Second)) {
		t.Errorf("agreeing again: since %v, want the new agreement", got)
	}
	if got := a.observe("other/v2", true, t0.Add(4*time.Second)); !got.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("another CRD: since %v, want its own", got)
	}
}

func TestARunKeepsTheServersCheckedBeforeIt(t *testing.T) {
	policy := &graduatorv1alpha1.CRDVersionPolicy{Spec: graduatorv1alpha1.CRDVersionPolicySpec{
		Migration: graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: 10 * time.Second}}}}
	agree := apiservers.Verdict{State: apiservers.Agree, Servers: []string{"a:1", "b:1"}, Reason: "every one of 2"}
	var r graduatorv1alpha1.MigrationStatus
	recordServers(&r, &run{policy: policy, servers: agree})
	if len(r.APIServers) != 2 || r.APIServersCheck != "every one of 2" {
		t.Errorf("agreeing servers: %v, %q", r.APIServers, r.APIServersCheck)
	}
	r = graduatorv1alpha1.MigrationStatus{}
	recordServers(&r, &run{policy: policy, servers: apiservers.Verdict{State: apiservers.Unchecked, Reason: "forbidden"}})
	if len(r.APIServers) != 0 || r.APIServersCheck != "not checked; the settle delay of 10s was waited instead: forbidden" {
		t.Errorf("servers not asked one by one: %v, %q", r.APIServers, r.APIServersCheck)
	}
}
