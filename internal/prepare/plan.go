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

// Package prepare decides what `graduator prepare` does in one cluster so
// that a release applies there without failing or losing data: a pure
// function of what `graduator scan` read (scan.Cluster). Carrying the plan
// out is the CLI's, through the graduation's one driver.
package prepare

import (
	"fmt"
	"slices"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/scan"
)

// Verdict is what prepare does to one CRD.
type Verdict string

const (
	// Migrate: rewrite every object in the storage version (round-trip
	// proof first), then prune status.storedVersions to it.
	Migrate Verdict = "Migrate"
	// Rollback: the release drops the version every object is stored in
	// and stores an older one (an operator rolled back): serve that version
	// if it is not served (ServeFrom), make it the storage version, prove
	// the round trip From -> StorageVersion -> From, rewrite every object
	// in it, then prune status.storedVersions to it.
	Rollback Verdict = "Rollback"
	// Refuse: the release trips on this CRD here and migrating cannot fix
	// it, or cannot be done safely now; nothing is written.
	Refuse Verdict = "Refuse"
)

// Where the schema of a version prepare serves comes from (CRDPlan.ServeFrom).
const (
	// ServeFromCluster: the cluster's CRD lists the version, unserved.
	ServeFromCluster = "cluster"
	// ServeFromRelease: the cluster's CRD no longer lists the version; it is
	// added as the release defines it.
	ServeFromRelease = "release"
)

// CRDPlan is the plan for one CRD the release ships. The JSON field names
// are a contract.
type CRDPlan struct {
	CRD     string  `json:"crd"`
	Verdict Verdict `json:"verdict"`
	// StorageVersion is what every object is rewritten in, and what
	// storedVersions is pruned to: the cluster's storage version, or for a
	// rollback the release's.
	StorageVersion string `json:"storageVersion"`
	// From is, for a rollback, the version every object is stored in now.
	From string `json:"from,omitempty"`
	// ServeFrom, when set, says that StorageVersion is not served in the
	// cluster and where the schema prepare serves it with comes from
	// (ServeFromCluster, ServeFromRelease).
	ServeFrom string `json:"serveFrom,omitempty"`
	// Webhook is the conversion webhook the rewrite reads through (the
	// cluster's, of the newer release), when the CRD converts by webhook.
	Webhook string `json:"webhook,omitempty"`
	// Why lists what the release would trip on (Migrate), or why it cannot
	// be fixed here (Refuse).
	Why []string `json:"why"`
}

// Plan is one cluster's plan.
type Plan struct {
	// CRDs are the release's CRDs to act on, by name.
	CRDs []CRDPlan
	// Reported is everything else the scan finds: shown, not acted on.
	Reported []scan.Finding
}

// Migrations counts the CRDs to migrate (roll backs included).
func (p Plan) Migrations() int {
	n := 0
	for _, c := range p.CRDs {
		if c.Verdict != Refuse {
			n++
		}
	}
	return n
}

// actedOn are the scan's rules a CRD's plan answers: listed in the plan,
// not reported again.
var actedOn = []string{scan.RuleStaleStoredVersions, scan.RuleStoredNotServed, scan.RuleStorageNotServed,
	scan.RuleReleasePrefix + "stored-version-removed"}

// For decides the plan of one cluster from what the scan read of it (with
// c.Release set: the release's CRDs). Only CRDs the release ships and the
// cluster holds are planned; a CRD is migrated when
//
//   - status.storedVersions lists a version the release drops (the API
//     server would refuse the release),
//   - or a version the release stops serving (objects may still be encoded
//     in it),
//   - or a version the cluster no longer serves;
//
// served first when its storage version is not served (discovery shows no
// hash for an unserved version, so nothing could settle); rolled back
// (Rollback) when the release drops the cluster's storage version and stores
// an older one; and refused, with nothing written, when the release drops
// the cluster's storage version for a newer one (migrating rewrites in that
// very version: a release that serves both must come first) or the CRD's
// conversion webhook has no ready endpoint (every read at another version
// fails).
func For(c scan.Cluster) Plan {
	var plan Plan
	planned := map[string]bool{}
	for i := range c.CRDs {
		crd := &c.CRDs[i]
		release, ok := c.Release[crd.Name]
		if !ok {
			continue
		}
		p, ok := forCRD(crd, release, c.Services)
		if !ok {
			continue
		}
		planned[crd.Name] = true
		plan.CRDs = append(plan.CRDs, p)
	}
	sort.Slice(plan.CRDs, func(i, j int) bool { return plan.CRDs[i].CRD < plan.CRDs[j].CRD })
	for _, f := range scan.Scan(c) {
		if planned[f.CRD] && slices.Contains(actedOn, f.Rule) {
			continue
		}
		plan.Reported = append(plan.Reported, f)
	}
	return plan
}

// forCRD is the plan of one CRD; false when the release does not trip on it.
func forCRD(live, release *apiextensionsv1.CustomResourceDefinition, services map[scan.ServiceKey]scan.Service) (CRDPlan, bool) {
	storage := graduation.StorageVersion(live)
	if storage != "" && version(release, storage) == nil {
		return rollback(live, release, services)
	}
	p := CRDPlan{CRD: live.Name, Verdict: Migrate, StorageVersion: storage, Why: staleWhy(live, release, storage)}
	if len(p.Why) == 0 {
		return CRDPlan{}, false
	}
	if storage != "" && !served(live, storage) && served(release, storage) {
		p.ServeFrom = ServeFromCluster
		p.Why = append(p.Why, fmt.Sprintf("the storage version %s is not served here, so no rewrite in it could settle: "+
			"prepare serves it first, as the release does", storage))
	}
	return withWebhook(live, p, services), true
}

// staleWhy says, for each version storedVersions lists besides except,
// why the release trips on it.
func staleWhy(live, release *apiextensionsv1.CustomResourceDefinition, except ...string) []string {
	var why []string
	for _, v := range live.Status.StoredVersions {
		switch {
		case slices.Contains(except, v):
		case version(release, v) == nil:
			why = append(why, fmt.Sprintf("status.storedVersions lists %s, which the release drops: the API server would refuse the release", v))
		case !version(release, v).Served:
			why = append(why, fmt.Sprintf("objects may be stored in %s, which the release stops serving", v))
		case !served(live, v):
			why = append(why, fmt.Sprintf("objects may be stored in %s, which this cluster no longer serves", v))
		}
	}
	return why
}

// rollback plans a CRD whose storage version the release drops: a rollback
// when the release stores an older version, else refused.
func rollback(live, release *apiextensionsv1.CustomResourceDefinition, services map[scan.ServiceKey]scan.Service) (CRDPlan, bool) {
	from, target := graduation.StorageVersion(live), graduation.StorageVersion(release)
	if target == "" || !graduation.IsRollback(from, target) {
		return CRDPlan{CRD: live.Name, Verdict: Refuse, StorageVersion: from, Why: []string{fmt.Sprintf(
			"the release drops %s, the version every object here is stored in: apply a release that serves %s and stores "+
				"a newer version first, then prepare again", from, from)}}, true
	}
	p := CRDPlan{CRD: live.Name, Verdict: Rollback, StorageVersion: target, From: from}
	switch {
	case version(live, target) == nil:
		p.ServeFrom = ServeFromRelease
	case !served(live, target):
		p.ServeFrom = ServeFromCluster
	}
	p.Why = append([]string{fmt.Sprintf("the release drops %s, the version every object here is stored in, and stores the older %s: "+
		"a rollback rewrites every object as %s and prunes status.storedVersions to [%s]", from, target, target, target)},
		staleWhy(live, release, target, from)...)
	return withWebhook(live, p, services), true
}

// withWebhook names the conversion webhook the rewrite reads through, and
// refuses the plan when it has no ready endpoint.
func withWebhook(live *apiextensionsv1.CustomResourceDefinition, p CRDPlan, services map[scan.ServiceKey]scan.Service) CRDPlan {
	for _, f := range scan.ConversionWebhook(live, services) {
		if f.Rule == scan.RuleWebhookNoEndpoint {
			return CRDPlan{CRD: live.Name, Verdict: Refuse, StorageVersion: p.StorageVersion, From: p.From, Why: []string{f.Why + "; " + f.Fix}}
		}
	}
	p.Webhook = webhookName(live)
	if p.Webhook != "" && p.Verdict == Rollback {
		p.Why = append(p.Why, fmt.Sprintf("the conversion is served by this cluster's current webhook (%s) until every object is "+
			"rewritten: keep it running (the release rolled back to may not convert %s)", p.Webhook, p.From))
	}
	return p
}

// webhookName names the CRD's conversion webhook; empty when it converts
// without one.
func webhookName(crd *apiextensionsv1.CustomResourceDefinition) string {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil {
		return ""
	}
	if svc := c.Webhook.ClientConfig.Service; svc != nil {
		return fmt.Sprintf("Service %s/%s", svc.Namespace, svc.Name)
	}
	if c.Webhook.ClientConfig.URL != nil {
		return *c.Webhook.ClientConfig.URL
	}
	return ""
}

func version(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func served(crd *apiextensionsv1.CustomResourceDefinition, name string) bool {
	v := version(crd, name)
	return v != nil && v.Served
}
