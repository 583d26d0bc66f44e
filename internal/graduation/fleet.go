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
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// FleetInput is what a selector policy's phase and conditions are decided
// from: the CRDs it selects, and the policies it generated for them.
type FleetInput struct {
	// Selected is how many CRDs the selector selects.
	Selected int32
	// Stale names the selected CRDs that still store older versions.
	Stale []string
	// Blocked is true when some selected CRD's policy is blocked.
	Blocked bool
	// Stalled are the fleet's own policies, of stale CRDs, that are
	// Stalled: a person must act there.
	Stalled []*graduatorv1alpha1.CRDVersionPolicy
}

// PlanFleet decides a selector policy's phase and conditions: Ready True
// when every selected CRD stores only its storage version; while some do
// not, Stalled when one of the fleet's policies of those is Stalled (its
// reason and message, and how many more), else Reconciling.
func PlanFleet(in FleetInput) (graduatorv1alpha1.Phase, []metav1.Condition) {
	ready := metav1.Condition{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonGraduated,
		Message: fmt.Sprintf("every one of the %d selected CRDs stores only its storage version", in.Selected)}
	phase := graduatorv1alpha1.PhaseGraduated
	if len(in.Stale) > 0 {
		stale := slicesSorted(in.Stale)
		shown := stale[:min(len(stale), 5)]
		ready.Status, ready.Reason = metav1.ConditionFalse, ReasonInProgress
		ready.Message = fmt.Sprintf("%d of %d selected CRDs still store older versions: %s", len(stale), in.Selected, strings.Join(shown, ", "))
		phase = graduatorv1alpha1.PhaseMigrating
		if in.Blocked {
			phase = graduatorv1alpha1.PhaseBlocked
		}
		if len(in.Stalled) > 0 {
			ready.Reason, ready.Message = stalledMembers(in.Stalled, in.Selected)
		}
	}
	conditions := []metav1.Condition{ready}
	SetProgress(&conditions, phase)
	return phase, conditions
}

// stalledMembers is the fleet's Ready reason and message while some of its
// policies are Stalled: the first one's (by CRD name) reason, its words,
// and how many more wait for a person.
func stalledMembers(stalled []*graduatorv1alpha1.CRDVersionPolicy, selected int32) (string, string) {
	stalled = append([]*graduatorv1alpha1.CRDVersionPolicy(nil), stalled...)
	sort.Slice(stalled, func(i, j int) bool { return stalled[i].Name < stalled[j].Name })
	first := meta.FindStatusCondition(stalled[0].Status.Conditions, graduatorv1alpha1.ConditionStalled)
	msg := fmt.Sprintf("%d of %d selected CRDs cannot go on until a person acts; %s: %s", len(stalled), selected, stalled[0].Name, first.Message)
	if more := len(stalled) - 1; more > 0 {
		names := make([]string, 0, min(more, 5))
		for _, m := range stalled[1:min(len(stalled), 6)] {
			names = append(names, m.Name)
		}
		msg += fmt.Sprintf("; also %s (see their policies)", strings.Join(names, ", "))
	}
	return first.Reason, msg
}

func slicesSorted(names []string) []string {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	return sorted
}
