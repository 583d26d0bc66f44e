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
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/migration"
)

// What the doors share beside the driver itself: the policy settings a
// one-shot door plans with, the predicate that interrupts a running migration,
// and the API-group match of selectors.

// Settings are the policy's migration settings a one-shot door plans
// with: where the writes go (the preflight and the access check read it),
// the settle delay and the accepted losses. The door's engine tuning goes
// to the engine as it is (Driver.Engine), not through the policy.
func Settings(writeTo migration.WriteTarget, settle time.Duration, acceptLoss []string) graduatorv1alpha1.MigrationSettings {
	return graduatorv1alpha1.MigrationSettings{
		WriteTo:     writeTo,
		SettleDelay: &metav1.Duration{Duration: settle},
		AcceptLoss:  acceptLoss,
	}
}

// Interrupting stops the running migration of the object's name, between
// two writes, for why, when the object (a CRD or a policy) changes
// generation or is deleted: the next plan decides, on fresh reads, whether
// it resumes, restarts or stops. It lets every update and delete through;
// predicates see each event before it is queued, which is when the run
// must learn of it.
func Interrupting(d *Driver, why error) predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				d.Interrupt(e.ObjectNew.GetName(), why)
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			d.Interrupt(e.Object.GetName(), why)
			return true
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// GroupMatches reports whether an API group matches a selector's pattern:
// the group itself, or "*.example.com" for every subgroup of example.com
// (not example.com itself).
func GroupMatches(pattern, group string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(group, "."+suffix)
	}
	return pattern == group
}
