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

package graduation

// Retirement: deprecate, then unserve, the versions no longer stored.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// desiredVersion is what the policy asks of one version.
type desiredVersion struct {
	name       string
	deprecate  bool
	warning    *string
	unserve    bool
	unserveAge time.Duration
}

// retirement deprecates, unserves and cleans up the listed versions.
func (p *planner) retirement(s Step, target string, gitOps bool) Step {
	var work retirementWork
	for _, want := range p.desired() {
		p.sortVersion(&work, want, target, gitOps)
	}
	s.Phase = graduatorv1alpha1.PhaseRetiring
	return p.retire(s, &work, target)
}

// retirementWork holds the listed versions by what is left to do to each.
type retirementWork struct {
	deprecate, unserve, clean []string
	// advice is what the CRD manifest may change (GitOps mode), waiting the
	// versions in their grace period, wait the shortest period left.
	advice, waiting []string
	wait            time.Duration
}

// sortVersion puts one listed version where its next step belongs.
func (p *planner) sortVersion(work *retirementWork, want desiredVersion, target string, gitOps bool) {
	v := crdVersion(p.crd, want.name)
	switch {
	case v == nil:
		// Removed from the CRD: retired for good.
	case want.unserve && (want.name == target || slices.Contains(p.crd.Status.StoredVersions, want.name)):
		// Only reachable in GitOps mode (the schema forbids unserving the
		// policy's storage version, and pruning came first): the manifest
		// still stores the version.
		work.advice = append(work.advice, fmt.Sprintf("%s is still the storage version: switch storage to another version first", want.name))
	case want.unserve && !apihelpers.HasServedCRDVersion(p.crd, want.name):
		// Unserved (by us or by the manifest): only the cleanup is left.
		if p.cleanupLeft(want.name) {
			work.clean = append(work.clean, want.name)
		}
	case want.deprecate && (!v.Deprecated || !ptr.Equal(v.DeprecationWarning, want.warning)):
		switch {
		case !gitOps:
			work.deprecate = append(work.deprecate, want.name)
		case want.unserve:
			work.advice = append(work.advice, fmt.Sprintf("%s is no longer stored: mark it deprecated, then unserve it after %s",
				want.name, want.unserveAge))
		default:
			work.advice = append(work.advice, fmt.Sprintf("%s can be marked deprecated", want.name))
		}
	case want.unserve:
		p.sortUnserve(work, want, gitOps)
	}
}

// sortUnserve waits out a deprecated version's grace period, then unserves
// it (managed mode) or says it can be (GitOps mode).
func (p *planner) sortUnserve(work *retirementWork, want desiredVersion, gitOps bool) {
	left := p.graceLeft(want)
	switch {
	case left > 0:
		work.waiting = append(work.waiting, fmt.Sprintf("%s stops being served in %s", want.name, left.Round(time.Second)))
		if work.wait == 0 || left < work.wait {
			work.wait = left
		}
	case gitOps:
		work.advice = append(work.advice, fmt.Sprintf("%s is no longer stored: it can be unserved", want.name))
	default:
		work.unserve = append(work.unserve, want.name)
	}
}

// cleanupLeft reports an unserved version whose managedFields entries the
// policy wants removed and that are not removed yet.
func (p *planner) cleanupLeft(name string) bool {
	if p.spec.CleanupManagedFields != nil && !*p.spec.CleanupManagedFields {
		return false
	}
	vs := p.versionStatus(name)
	return vs == nil || !vs.ManagedFieldsCleaned
}

// retire takes the first step the work holds: deprecate, unserve, clean up,
// then advise or wait; with nothing left the graduation is done.
func (p *planner) retire(s Step, work *retirementWork, target string) Step {
	slices.Sort(work.deprecate)
	slices.Sort(work.unserve)
	slices.Sort(work.clean)
	// act acts on versions: VersionsRetired says what is done to them
	// (condFormat), Ready what the graduation does (readyFormat).
	act := func(action Action, versions []string, reason, condFormat, readyFormat string) Step {
		s.Action, s.Versions = action, versions
		list := strings.Join(versions, ", ")
		p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionFalse, reason, condFormat, list)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress, readyFormat, list)
	}
	// hold waits, for the manifest or a grace period, saying why.
	hold := func(reason, msg string) Step {
		p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionFalse, reason, "%s", msg)
		s.RequeueAfter = work.wait
		return p.finish(s, metav1.ConditionFalse, reason, "%s", msg)
	}
	switch {
	case len(work.deprecate) > 0:
		return act(ActionDeprecate, work.deprecate, ReasonRetiring, "marking %s deprecated", "deprecating %s")
	case len(work.unserve) > 0:
		return act(ActionUnserve, work.unserve, ReasonRetiring, "unserving %s", "unserving %s")
	case len(work.clean) > 0:
		return act(ActionCleanupManagedFields, work.clean, ReasonCleaningManagedFields,
			"removing managedFields entries of %s", "cleaning managedFields of %s")
	case len(work.advice) > 0:
		return hold(ReasonAwaitingManifestChange,
			"the CRD manifest owns spec.versions (GitOps mode): "+strings.Join(work.advice, "; "))
	case len(work.waiting) > 0:
		return hold(ReasonGracePeriod, strings.Join(work.waiting, "; "))
	}
	p.set(graduatorv1alpha1.ConditionVersionsRetired, metav1.ConditionTrue, ReasonRetired,
		"every listed version is deprecated or unserved as the policy asks")
	s.Phase = graduatorv1alpha1.PhaseGraduated
	return p.finish(s, metav1.ConditionTrue, ReasonGraduated, "%s stores only %s", p.crd.Name, target)
}

// desired merges the deprecate and unserve lists: a version to unserve is
// deprecated first, so its clients get a warning during the grace period.
func (p *planner) desired() []desiredVersion {
	byName := map[string]*desiredVersion{}
	var order []string
	get := func(name string) *desiredVersion {
		if d, ok := byName[name]; ok {
			return d
		}
		d := &desiredVersion{name: name}
		byName[name] = d
		order = append(order, name)
		return d
	}
	for _, d := range p.spec.Deprecate {
		dv := get(d.Version)
		dv.deprecate = true
		if d.Warning != "" {
			w := d.Warning
			dv.warning = &w
		}
	}
	for _, u := range p.spec.Unserve {
		dv := get(u.Version)
		dv.deprecate = true
		dv.unserve = true
		if u.After != nil {
			dv.unserveAge = u.After.Duration
		}
	}
	out := make([]desiredVersion, 0, len(order))
	for _, name := range order {
		out = append(out, *byName[name])
	}
	return out
}

// graceLeft is how long a deprecated version still has to be served.
func (p *planner) graceLeft(want desiredVersion) time.Duration {
	since := p.in.Now
	if vs := p.versionStatus(want.name); vs != nil && vs.DeprecatedSince != nil {
		since = vs.DeprecatedSince.Time
	}
	return since.Add(want.unserveAge).Sub(p.in.Now)
}

func (p *planner) versionStatus(name string) *graduatorv1alpha1.VersionStatus {
	for i := range p.status.Versions {
		if p.status.Versions[i].Name == name {
			return &p.status.Versions[i]
		}
	}
	return nil
}

func (p *planner) everObserved(name string) bool {
	return p.versionStatus(name) != nil
}
