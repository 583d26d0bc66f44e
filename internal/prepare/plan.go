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
	// Refuse: the release trips on this CRD here and migrating cannot fix
	// it, or cannot be done safely now; nothing is written.
	Refuse Verdict = "Refuse"
)

// CRDPlan is the plan for one CRD the release ships. The JSON field names
// are a contract.
type CRDPlan struct {
	CRD     string  `json:"crd"`
	Verdict Verdict `json:"verdict"`
	// StorageVersion is the cluster's storage version: what every object
	// is rewritten in, and what storedVersions is pruned to.
	StorageVersion string `json:"storageVersion"`
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

// Migrations counts the CRDs to migrate.
func (p Plan) Migrations() int {
	n := 0
	for _, c := range p.CRDs {
		if c.Verdict == Migrate {
			n++
		}
	}
	return n
}

// actedOn are the scan's rules a CRD's plan answers: listed in the plan,
// not reported again.
var actedOn = []string{scan.RuleStaleStoredVersions, scan.RuleStoredNotServed, scan.RuleReleasePrefix + "stored-version-removed"}

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
// and refused, with nothing written, when the release drops the cluster's
// storage version (migrating rewrites in that very version: a release that
// serves both must come first) or its conversion webhook has no ready
// endpoint (every read at another version fails).
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
	p := CRDPlan{CRD: live.Name, Verdict: Migrate, StorageVersion: storage}
	for _, v := range graduation.StaleStoredVersions(live) {
		switch {
		case version(release, v) == nil:
			p.Why = append(p.Why, fmt.Sprintf("status.storedVersions lists %s, which the release drops: the API server would refuse the release", v))
		case !version(release, v).Served:
			p.Why = append(p.Why, fmt.Sprintf("objects may be stored in %s, which the release stops serving", v))
		case !served(live, v):
			p.Why = append(p.Why, fmt.Sprintf("objects may be stored in %s, which this cluster no longer serves", v))
		}
	}
	if storage != "" && version(release, storage) == nil {
		return CRDPlan{CRD: live.Name, Verdict: Refuse, StorageVersion: storage, Why: []string{fmt.Sprintf(
			"the release drops %s, the version every object here is stored in: apply a release that serves %s and stores "+
				"a newer version first, then prepare again", storage, storage)}}, true
	}
	if len(p.Why) == 0 {
		return CRDPlan{}, false
	}
	for _, f := range scan.ConversionWebhook(live, services) {
		if f.Rule == scan.RuleWebhookNoEndpoint {
			return CRDPlan{CRD: live.Name, Verdict: Refuse, StorageVersion: storage, Why: []string{f.Why + "; " + f.Fix}}, true
		}
	}
	return p, true
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
