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
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
)

func TestOutcomeFailure(t *testing.T) {
	denied := errors.New("patch pizzas: forbidden")
	ready := func(reason, message string) []metav1.Condition {
		return []metav1.Condition{{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}}
	}
	for _, tc := range []struct {
		name string
		out  Outcome
		want string
	}{
		{name: "a failed step: its error",
			out:  Outcome{Stall: &graduation.Stall{Message: "Migrate failed (attempt 1): ...; retrying in 5s"}, Err: denied},
			want: denied.Error()},
		{name: "blocked on a person: the plan's message and reason",
			out: Outcome{Step: graduation.Step{Phase: graduatorv1alpha1.PhaseBlocked,
				Conditions: ready("ObjectsFailed", "3 objects could not be rewritten")}},
			want: "3 objects could not be rewritten (ObjectsFailed)"},
		{name: "graduated", out: Outcome{Step: graduation.Step{Phase: graduatorv1alpha1.PhaseGraduated}}},
		{name: "waiting for a grace period", out: Outcome{Step: graduation.Step{Phase: graduatorv1alpha1.PhaseRetiring}}},
		{name: "held: the next action is not the door's",
			out: Outcome{Held: true, Step: graduation.Step{Phase: graduatorv1alpha1.PhaseMigrating}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.out.Failure()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Failure() = %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("Failure() = %v, want %q", err, tc.want)
			}
			if tc.out.Err != nil && !errors.Is(err, tc.out.Err) {
				t.Errorf("Failure() does not wrap the step's error")
			}
		})
	}
}
