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
	"k8s.io/apimachinery/pkg/version"

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
			return p.unservedTarget(s, target)
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

// unservedTarget is a managed target that is not served. Serving it is
// the first step of a rollback (a target older than the version the CRD
// stores: what a GitOps rollback of the policy leaves after the newer
// release unserved it) and of a CRD that stores the target without serving
// it (discovery never shows an unserved version's hash, so nothing could
// settle). A newer target is the policy author's to serve: unserved, it is
// most likely a version not ready for clients.
func (p *planner) unservedTarget(s Step, target string) (Step, bool) {
	current := StorageVersion(p.crd)
	if !Servable(current, target) {
		return p.blocked(s, ReasonVersionNotServed,
			"version %s of %s is not served; serve it before making it the storage version; nothing was changed",
			target, p.crd.Name), true
	}
	s.Action = ActionServe
	s.Phase = graduatorv1alpha1.PhasePreflight
	if current == target {
		p.set(graduatorv1alpha1.ConditionStorageVersionSet, metav1.ConditionFalse, ReasonVersionNotServed,
			"the CRD stores %s without serving it; Graduator serves it first", target)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"serving %s, the storage version of %s: discovery shows no hash for an unserved version, so nothing could settle",
			target, p.crd.Name), true
	}
	p.set(graduatorv1alpha1.ConditionStorageVersionSet, metav1.ConditionFalse, ReasonSwitchPending,
		"rolling back: the CRD stores %s; Graduator serves %s, proves %s -> %s -> %s, then switches storage to %s",
		current, target, current, target, current, target)
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
		"rolling back from %s to %s: serving %s first", current, target, target), true
}

// Servable reports whether a graduation whose CRD stores current may
// serve target itself (ActionServe): when it is the storage version
// already, or a rollback to an older version (Kubernetes' version order).
func Servable(current, target string) bool {
	return current == target || (current != "" && IsRollback(current, target))
}

// IsRollback reports whether making target the storage version of a CRD
// that stores current goes back to an older version (Kubernetes' version
// order: v1alpha1 < v1beta1 < v1 < v2).
func IsRollback(current, target string) bool {
	return version.CompareKubeAwareVersionStrings(target, current) < 0
}
