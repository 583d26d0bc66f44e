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

package prepare

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graduator/graduator/internal/scan"
)

// v is a version: served, and storage when stored.
type v struct {
	name           string
	served, stored bool
}

func crd(name string, stored []string, versions ...v) apiextensionsv1.CustomResourceDefinition {
	c := apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name + ".example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: name, Kind: "K"}}}
	for _, ver := range versions {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: ver.name, Served: ver.served, Storage: ver.stored})
	}
	c.Status.StoredVersions = stored
	return c
}

func webhook(c apiextensionsv1.CustomResourceDefinition) apiextensionsv1.CustomResourceDefinition {
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{
			Service: &apiextensionsv1.ServiceReference{Namespace: "ns", Name: "conv"}}}}
	return c
}

func TestFor(t *testing.T) {
	v1, v2 := v{"v1", true, false}, v{"v2", true, true}
	v1Unserved := v{name: "v1"}
	release := func(cs ...apiextensionsv1.CustomResourceDefinition) map[string]*apiextensionsv1.CustomResourceDefinition {
		out := map[string]*apiextensionsv1.CustomResourceDefinition{}
		for i := range cs {
			out[cs[i].Name] = &cs[i]
		}
		return out
	}
	tests := []struct {
		name     string
		cluster  scan.Cluster
		want     map[string]Verdict
		why      string // a substring of the first CRD's first reason
		reported []string
		// serveFrom and from are the first CRD's.
		serveFrom, from string
	}{{
		name:    "a stored version the release drops is migrated",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v1", "v2"}, v1, v2)}, Release: release(crd("as", nil, v2))},
		want:    map[string]Verdict{"as.example.com": Migrate},
		why:     "lists v1, which the release drops",
	}, {
		name:    "a stored version the release stops serving is migrated",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v1", "v2"}, v1, v2)}, Release: release(crd("as", nil, v1Unserved, v2))},
		want:    map[string]Verdict{"as.example.com": Migrate},
		why:     "v1, which the release stops serving",
	}, {
		name:    "a stored version the cluster no longer serves is migrated",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v1", "v2"}, v1Unserved, v2)}, Release: release(crd("as", nil, v1, v2))},
		want:    map[string]Verdict{"as.example.com": Migrate},
		why:     "this cluster no longer serves",
	}, {
		name: "a stale stored version the release keeps serving is reported, not acted on",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v1", "v2"}, v1, v2)},
			Release: release(crd("as", nil, v1, v2))},
		want:     map[string]Verdict{},
		reported: []string{scan.RuleStaleStoredVersions},
	}, {
		name:    "a ready CRD has no plan",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v2"}, v2)}, Release: release(crd("as", nil, v2))},
		want:    map[string]Verdict{},
	}, {
		name: "CRDs the release does not ship are not planned, only reported",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("others", []string{"v1", "v2"}, v1Unserved, v2)},
			Release: release(crd("as", nil, v2))},
		want:     map[string]Verdict{},
		reported: []string{scan.RuleStaleStoredVersions, scan.RuleStoredNotServed},
	}, {
		name:     "the release dropping the cluster's storage version is refused",
		cluster:  scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v1"}, v{"v1", true, true}, v{"v2", true, false})}, Release: release(crd("as", nil, v2))},
		want:     map[string]Verdict{"as.example.com": Refuse},
		why:      "the release drops v1, the version every object here is stored in",
		reported: []string{scan.RuleReleasePrefix + "served-version-removed"},
	}, {
		name: "a conversion webhook without endpoints is refused",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd("as", []string{"v1", "v2"}, v1, v2))},
			Services: map[scan.ServiceKey]scan.Service{{Namespace: "ns", Name: "conv"}: {}}, Release: release(crd("as", nil, v2))},
		want:     map[string]Verdict{"as.example.com": Refuse},
		why:      "has no ready endpoint",
		reported: []string{scan.RuleWebhookNoEndpoint},
	}, {
		name: "a conversion webhook with endpoints is migrated",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd("as", []string{"v1", "v2"}, v1, v2))},
			Services: map[scan.ServiceKey]scan.Service{{Namespace: "ns", Name: "conv"}: {ReadyEndpoints: 1}}, Release: release(crd("as", nil, v2))},
		want: map[string]Verdict{"as.example.com": Migrate},
		why:  "which the release drops",
	}, {
		name: "a release that stores an older version than the cluster's rolls back",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v2"}, v1, v2)},
			Release: release(crd("as", nil, v{"v1", true, true}))},
		want: map[string]Verdict{"as.example.com": Rollback}, from: "v2",
		why: "the release drops v2, the version every object here is stored in, and stores the older v1",
	}, {
		name: "a rollback serves the older version when the cluster's CRD has it unserved",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v2"}, v1Unserved, v2)},
			Release: release(crd("as", nil, v{"v1", true, true}))},
		want: map[string]Verdict{"as.example.com": Rollback}, from: "v2", serveFrom: ServeFromCluster,
	}, {
		name: "a rollback adds the older version from the release when the cluster's CRD no longer lists it",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v2"}, v2)},
			Release: release(crd("as", nil, v{"v1", true, true}))},
		want: map[string]Verdict{"as.example.com": Rollback}, from: "v2", serveFrom: ServeFromRelease,
	}, {
		name: "a rollback across a conversion webhook names it: it must run until the rewrite ends",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd("as", []string{"v2"}, v1, v2))},
			Services: map[scan.ServiceKey]scan.Service{{Namespace: "ns", Name: "conv"}: {ReadyEndpoints: 1}},
			Release:  release(crd("as", nil, v{"v1", true, true}))},
		want: map[string]Verdict{"as.example.com": Rollback}, from: "v2",
		why: "current webhook (Service ns/conv) until every object is rewritten",
	}, {
		name: "a rollback across a conversion webhook without endpoints is refused",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{webhook(crd("as", []string{"v2"}, v1, v2))},
			Services: map[scan.ServiceKey]scan.Service{{Namespace: "ns", Name: "conv"}: {}},
			Release:  release(crd("as", nil, v{"v1", true, true}))},
		want: map[string]Verdict{"as.example.com": Refuse}, from: "v2",
		why: "has no ready endpoint",
	}, {
		name: "a storage version the cluster does not serve is served first",
		cluster: scan.Cluster{CRDs: []apiextensionsv1.CustomResourceDefinition{crd("as", []string{"v2", "v1"}, v{name: "v1", stored: true}, v{"v2", true, false})},
			Release: release(crd("as", nil, v{"v1", true, true}))},
		want: map[string]Verdict{"as.example.com": Migrate}, serveFrom: ServeFromCluster,
		why: "lists v2, which the release drops",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := For(tt.cluster)
			got := map[string]Verdict{}
			for _, p := range plan.CRDs {
				got[p.CRD] = p.Verdict
			}
			if len(got) != len(tt.want) {
				t.Fatalf("planned %v, want %v", got, tt.want)
			}
			for name, verdict := range tt.want {
				if got[name] != verdict {
					t.Errorf("%s: %s, want %s", name, got[name], verdict)
				}
			}
			if len(plan.CRDs) > 0 && (plan.CRDs[0].ServeFrom != tt.serveFrom || plan.CRDs[0].From != tt.from) {
				t.Errorf("serveFrom %q from %q, want %q and %q", plan.CRDs[0].ServeFrom, plan.CRDs[0].From, tt.serveFrom, tt.from)
			}
			if tt.why != "" && !strings.Contains(strings.Join(plan.CRDs[0].Why, "; "), tt.why) {
				t.Errorf("why %q, want it to say %q", plan.CRDs[0].Why, tt.why)
			}
			var rules []string
			for _, f := range plan.Reported {
				rules = append(rules, f.Rule)
			}
			for _, rule := range tt.reported {
				if !strings.Contains(strings.Join(rules, " "), rule) {
					t.Errorf("reported %v, want %s among them", rules, rule)
				}
			}
			for _, f := range plan.Reported {
				if got[f.CRD] != "" && (f.Rule == scan.RuleStaleStoredVersions || f.Rule == scan.RuleStoredNotServed) {
					t.Errorf("%s of planned %s reported too", f.Rule, f.CRD)
				}
			}
		})
	}
}
