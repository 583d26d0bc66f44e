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

package v1alpha1_test

import (
	"testing"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// The generated schema (make manifests) holds each bounded list to the
// number the code keeps: a list the code fills past the schema's MaxItems
// would make every status write fail validation.
func TestSchemaLimitsAreTheCodesConstants(t *testing.T) {
	schema := policySchema(t)
	for path, want := range map[string]int64{
		"status.migration.failures":      graduatorv1alpha1.MaxFailuresKept,
		"status.fleet.migrating":         graduatorv1alpha1.MaxFleetMembersListed,
		"status.fleet.blocked":           graduatorv1alpha1.MaxFleetMembersListed,
		"status.fleet.governedElsewhere": graduatorv1alpha1.MaxFleetMembersListed,
		"status.roundTrip.losses":        graduatorv1alpha1.MaxLossesListed,
		"status.roundTrip.accepted":      graduatorv1alpha1.MaxLossesListed,
	} {
		node := schemaNode(t, schema, path)
		switch {
		case node.MaxItems == nil:
			t.Errorf("%s: no maxItems in the schema, %d in the code", path, want)
		case *node.MaxItems != want:
			t.Errorf("%s: maxItems %d in the schema, %d in the code", path, *node.MaxItems, want)
		}
	}
}
