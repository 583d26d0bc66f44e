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

package scan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type ver struct {
	name                        string
	served, storage, deprecated bool
}

func crd(stored []string, vs ...ver) apiextensionsv1.CustomResourceDefinition {
	c := apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "pizzas.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "pizzas"}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
	for _, v := range vs {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.name, Served: v.served, Storage: v.storage, Deprecated: v.deprecated})
	}
	return c
}

func webhook(c apiextensionsv1.CustomResourceDefinition) apiextensionsv1.CustomResourceDefinition {
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{
			Service: &apiextensionsv1.ServiceReference{Namespace: "shop", Name: "conv"}}}}
	return c
}

var (
	v2       = ver{name: "v2", served: true, storage: true}
	v1Old    = ver{name: "v1", served: true}
	v1Gone   = ver{name: "v1"}
	v1Depr   = ver{name: "v1", served: true, deprecated: true}
	v1DeprSt = ver{name: "v1", served: true, storage: true, deprecated: true}
	conv     = ServiceKey{Namespace: "shop", Name: "conv"}
)

// rules is what a finding list says, in a form a table can hold.
func rules(fs []Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, string(f.Severity)+" "+f.Rule)
	}
	return out
}

func TestScanFindsWhatTheNextUpgradeTripsOn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster Cluster
		want    []string
		// whyHas is a phrase one finding's Why must carry.
		whyHas string
	}{
		{name: "healthy", cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Old, v2)}}, want: []string{}},
		{name: "stale storedVersions names the versions",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v1", "v2"}, v1Old, v2)}},
			want:    []string{"error stale-stored-versions"}, whyHas: "still lists v1 besides the storage version v2: a release that drops v1 is refused"},
		{name: "stored but not served",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v1", "v2"}, v1Gone, v2)}},
			want:    []string{"error stale-stored-versions", "warning stored-version-not-served"}, whyHas: "no longer served"},
		{name: "deprecated storage version",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v1"}, v1DeprSt, ver{name: "v2", served: true})}},
			want:    []string{"warning deprecated-storage-version"}, whyHas: "the storage version v1 is deprecated"},
		{name: "deprecated served version, no policy API",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Depr, v2)}},
			want:    []string{"info deprecated-version-not-retired"}, whyHas: "retiring it is its vendor's call"},
		{name: "deprecated served version, the policy API but no policy for the CRD",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Depr, v2)}, PolicyAPI: true,
				Policies: map[string]Policy{"other.example.com": {Name: "other.example.com"}}},
			want: []string{"info deprecated-version-not-retired"}, whyHas: "no CRDVersionPolicy governs the CRD"},
		{name: "deprecated served version, a policy that does not unserve it",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Depr, v2)}, PolicyAPI: true,
				Policies: map[string]Policy{"pizzas.example.com": {Name: "pizzas.example.com", Unserve: []string{"v0"}}}},
			want: []string{"warning deprecated-version-not-retired"}, whyHas: "the CRDVersionPolicy pizzas.example.com does not list it"},
		{name: "deprecated served version a policy unserves",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Depr, v2)}, PolicyAPI: true,
				Policies: map[string]Policy{"pizzas.example.com": {Name: "pizzas.example.com", Unserve: []string{"v1"}}}},
			want: []string{}},
		{name: "webhook without a ready endpoint",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd([]string{"v2"}, v1Old, v2))},
				Services: map[ServiceKey]Service{conv: {}}},
			want: []string{"error conversion-webhook-no-endpoint"}, whyHas: "shop/conv has no ready endpoint"},
		{name: "webhook whose Service is missing",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd([]string{"v2"}, v1Old, v2))},
				Services: map[ServiceKey]Service{conv: {Missing: true}}},
			want: []string{"error conversion-webhook-no-endpoint"}, whyHas: "does not exist"},
		{name: "webhook with a ready endpoint",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd([]string{"v2"}, v1Old, v2))},
				Services: map[ServiceKey]Service{conv: {ReadyEndpoints: 1}}},
			want: []string{}},
		{name: "webhook the scan may not check",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd([]string{"v2"}, v1Old, v2))},
				Services: map[ServiceKey]Service{conv: {NotChecked: "forbidden: needs get on services in shop"}}},
			want: []string{"info conversion-webhook-not-checked"}, whyHas: "needs get on services"},
		{name: "failed in-tree migration of this resource only",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Old, v2)},
				InTree: []InTreeMigration{{Name: "m1", Resource: "pizzas.example.com", Failed: true, Message: "conversion failed"},
					{Name: "m2", Resource: "pastas.example.com", Failed: true}, {Name: "m3", Resource: "pizzas.example.com"}}},
			want: []string{"error storage-version-migration-failed"}, whyHas: "m1 failed (conversion failed)"},
		{name: "stalled policy",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Old, v2)}, PolicyAPI: true,
				Policies: map[string]Policy{"pizzas.example.com": {Name: "pizzas.example.com", StalledReason: "Forbidden", StalledMessage: "grant patch"}}},
			want: []string{"error policy-stalled"}, whyHas: "stalled (Forbidden): grant patch"},
		{name: "a storage version switched to while it is not served",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2", "v1"}, ver{name: "v1", storage: true}, ver{name: "v2", served: true})}},
			want:    []string{"error stale-stored-versions", "error storage-version-not-served"},
			whyHas:  "the storage version v1 is not served: discovery shows no hash for it"},
		{name: "a release that drops a stored version",
			cluster: Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, v1Old, v2)},
				Release: map[string]*apiextensionsv1.CustomResourceDefinition{"pizzas.example.com": ptr(crd(nil, ver{name: "v3", served: true, storage: true}))}},
			want: []string{"error release/served-version-removed", "error release/served-version-removed",
				"error release/storage-version-not-served-before", "error release/stored-version-removed"},
			whyHas: "v2 is removed but status.storedVersions still lists it: the API server refuses the CRD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Scan(tc.cluster)
			if diff := cmp.Diff(tc.want, rules(got)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%+v", diff, got)
			}
			if tc.whyHas == "" {
				return
			}
			for _, f := range got {
				if strings.Contains(f.Why, tc.whyHas) {
					if f.Fix == "" {
						t.Errorf("%s has no fix", f.Rule)
					}
					return
				}
			}
			t.Errorf("no finding says %q: %+v", tc.whyHas, got)
		})
	}
}

func TestSeverityThresholds(t *testing.T) {
	for _, tc := range []struct {
		s, threshold Severity
		want         bool
	}{{Error, Warning, true}, {Warning, Warning, true}, {Info, Warning, false}, {Warning, Error, false}, {Info, Info, true}} {
		if got := tc.s.AtLeast(tc.threshold); got != tc.want {
			t.Errorf("%s at least %s: %v, want %v", tc.s, tc.threshold, got, tc.want)
		}
	}
	if _, err := ParseSeverity("fatal"); err == nil {
		t.Error("an unknown --fail-on is accepted")
	}
}

func ptr[T any](v T) *T { return &v }

func TestStorageVersionRemovedAdvice(t *testing.T) {
	stored := ver{name: "v2", served: true, storage: true}
	for _, tc := range []struct {
		name    string
		release ver
		fix     []string
	}{
		{name: "a release that stores an older version is rolled back by prepare",
			release: ver{name: "v1", served: true, storage: true},
			fix:     []string{"graduator prepare --against 'rel ease/' --against - --context prod-eu", "a rollback", "makes v1 the storage version"}},
		{name: "a release that stores a newer version needs the release between",
			release: ver{name: "v3", served: true, storage: true},
			fix:     []string{"apply a release that serves v2 and stores a newer version first", "graduator prepare --against"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd([]string{"v2"}, ver{name: "v1"}, stored)},
				Release: map[string]*apiextensionsv1.CustomResourceDefinition{"pizzas.example.com": ptr(crd(nil, tc.release))},
				Against: []string{"rel ease/", "-"}, Context: "prod-eu"}
			var fix string
			for _, f := range Scan(c) {
				if f.Rule == RuleReleasePrefix+"stored-version-removed" {
					fix = f.Fix
				}
			}
			for _, part := range tc.fix {
				if !strings.Contains(fix, part) {
					t.Errorf("fix %q does not say %q", fix, part)
				}
			}
			if strings.Contains(fix, "graduator migrate") {
				t.Errorf("fix %q names migrate, which has nothing to do here", fix)
			}
		})
	}
}
