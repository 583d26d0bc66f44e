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

package v1alpha1

// How many entries the status keeps in its bounded lists. The schema's
// MaxItems markers repeat these numbers (markers cannot name a constant);
// limits_test.go fails when the two disagree.
const (
	// MaxFailuresKept bounds status.migration.failures.
	MaxFailuresKept = 20
	// MaxFleetMembersListed bounds each list of status.fleet (migrating,
	// blocked, governedElsewhere).
	MaxFleetMembersListed = 20
	// MaxLossesListed bounds status.roundTrip.losses and .accepted.
	MaxLossesListed = 20
)
