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

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// permanentReasons are the Ready reasons of a graduation that cannot move
// on until a person changes something: the policy, the CRD, RBAC, an
// object, or the CRD manifest in Git. Every other reason that is not Ready
// moves on by itself: a step under way, a wait that ends (settling, a grace
// period, someone else's in-tree run), or a failed step retried with
// backoff (a conversion webhook down, 5xx and 429, a conflict).
var permanentReasons = map[string]bool{
	ReasonPaused:                   true, // set spec.paused to false
	ReasonCRDNotFound:              true, // create the CRD
	ReasonUnknownVersion:           true, // fix the policy
	ReasonVersionNotServed:         true, // serve the version
	ReasonConversionNotConfigured:  true, // configure spec.conversion
	ReasonStatusSubresourceMissing: true, // writeTo or the CRD's subresources
	ReasonForbidden:                true, // grant the RBAC rule
	ReasonConversionLossy:          true, // fix the conversion
	ReasonMigrationFailed:          true, // fix or delete the refused objects
	ReasonAwaitingManifestChange:   true, // change the CRD manifest in Git
}

// Permanent reports whether a Ready reason says the graduation waits for a
// person: kstatus then reads the policy as Failed (Stalled=True) rather than
// as InProgress, so a GitOps tool waiting on it fails with the reason
// instead of waiting out its timeout. The operator still looks again now and
// then (a person may have fixed it), and the stall clears by itself then.
func Permanent(reason string) bool {
	return permanentReasons[reason]
}

// SetProgress sets Reconciling and Stalled beside the Ready condition
// already in conditions, as kstatus reads them: Ready=True, both False;
// a permanent reason (Permanent), Stalled=True with Ready's reason and
// message; otherwise Reconciling=True with the step as its reason (the
// phase while a step of the graduation is under way, else Ready's reason)
// and Ready's message. Never both True: kstatus takes the first it finds.
func SetProgress(conditions *[]metav1.Condition, phase graduatorv1alpha1.Phase) {
	ready := meta.FindStatusCondition(*conditions, graduatorv1alpha1.ConditionReady)
	if ready == nil {
		return
	}
	reason, message := ready.Reason, ready.Message
	reconciling, stalled := metav1.ConditionFalse, metav1.ConditionFalse
	step := reason
	switch {
	case ready.Status == metav1.ConditionTrue:
	case Permanent(reason):
		stalled = metav1.ConditionTrue
	default:
		reconciling = metav1.ConditionTrue
		if stepPhases[phase] {
			step = string(phase)
		}
	}
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type: graduatorv1alpha1.ConditionReconciling, Status: reconciling, Reason: step, Message: message,
	})
	meta.SetStatusCondition(conditions, metav1.Condition{
		Type: graduatorv1alpha1.ConditionStalled, Status: stalled, Reason: reason, Message: message,
	})
}

// stepPhases are the phases that name a step under way.
var stepPhases = map[graduatorv1alpha1.Phase]bool{
	graduatorv1alpha1.PhasePreflight:        true,
	graduatorv1alpha1.PhaseSwitchingStorage: true,
	graduatorv1alpha1.PhaseMigrating:        true,
	graduatorv1alpha1.PhasePruning:          true,
	graduatorv1alpha1.PhaseRetiring:         true,
}
