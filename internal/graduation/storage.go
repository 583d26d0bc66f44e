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

// The checks of the policy against the CRD, and the storage switch.

import (
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// checkVersions refuses a policy that names versions the CRD does not have.
func (p *planner) checkVersions(s Step, target string, gitOps bool) (Step, bool) {
	if StatusSubresourceMissing(p.crd, target, p.spec.Migration.WriteTo) {
		// Every write to /status would answer 404 and migrate nothing.
		return p.blocked(s, ReasonStatusSubresourceMissing,
			"spec.migration.writeTo is Status but version %s of %s has no status subresource, so no object could be "+
				"rewritten; set writeTo: Object or enable subresources.status on %s; nothing was changed",
			target, p.crd.Name, target), true
	}
	if !gitOps {
		if crdVersion(p.crd, target) == nil {
			return p.blocked(s, ReasonUnknownVersion,
				"spec.storageVersion %q is not a version of CustomResourceDefinition %s (it has %s); nothing was changed",
				target, p.crd.Name, strings.Join(versionNames(p.crd), ", ")), true
		}
		if !apihelpers.HasServedCRDVersion(p.crd, target) {
			return p.blocked(s, ReasonVersionNotServed,
				"version %s of %s is not served; serve it before making it the storage version; nothing was changed",
				target, p.crd.Name), true
		}
	}
	// A listed version missing from the CRD is fine once the version has been
	// retired (removed from the manifest); one the CRD never had is a typo.
	var unknown []string
	for _, name := range listedVersions(p.spec) {
		if crdVersion(p.crd, name) == nil && !p.everObserved(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return p.blocked(s, ReasonUnknownVersion,
			"%s listed in the policy %s not a version of CustomResourceDefinition %s (it has %s); nothing was changed",
			strings.Join(unknown, ", "), isAre(len(unknown)), p.crd.Name, strings.Join(versionNames(p.crd), ", ")), true
	}
	return s, false
}

// storage walks preflight and the storage switch (managed mode only: in GitOps
// mode the CRD's own flag is the target, so it is always set).
func (p *planner) storage(s Step, current, target string) (Step, bool) {
	if current == target {
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionTrue, ReasonStorageVersionSet,
			"the CRD already stores %s", target)
		p.set(graduatorv1alpha1.ConditionStorageVersionSet, metav1.ConditionTrue, ReasonStorageVersionSet,
			"the CRD stores %s", target)
		return s, false
	}
	p.set(graduatorv1alpha1.ConditionStorageVersionSet, metav1.ConditionFalse, ReasonSwitchPending,
		"the CRD stores %s; Graduator will switch it to %s after the preflight checks", current, target)

	if ConversionMissing(p.crd, crdVersion(p.crd, current), crdVersion(p.crd, target)) {
		p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionFalse, ReasonConversionNotConfigured,
			"versions %s and %s have different schemas but the CRD has no conversion webhook", current, target)
		return p.blocked(s, ReasonConversionNotConfigured,
			"versions %s and %s of %s have different schemas but spec.conversion.strategy is not Webhook: "+
				"objects would be stored unconverted; configure a conversion webhook; nothing was changed",
			current, target, p.crd.Name), true
	}

	if s, stop := p.preflight(s, target, beforeSwitch); stop {
		return s, true
	}
	p.set(graduatorv1alpha1.ConditionPreflightPassed, metav1.ConditionTrue, ReasonPreflightSucceeded,
		"objects read and write at %s", target)
	s.Action = ActionSwitchStorage
	s.Phase = graduatorv1alpha1.PhaseSwitchingStorage
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress, "switching the storage version from %s to %s", current, target), true
}
