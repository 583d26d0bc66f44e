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

// Package gitops applies CRD manifests the way a GitOps tool configured for
// Graduator's managed mode does: the manifest wins, except for the flags the
// operator owns on versions that already exist. The rule is
// internal/sample's (what `make demo` applies stages with); the suites name
// it here.
package gitops

import "github.com/graduator/graduator/internal/sample"

var (
	// KeepOperatorFlags returns the manifest with served, storage,
	// deprecated and deprecationWarning of every version the live CRD also
	// has taken from the live CRD.
	KeepOperatorFlags = sample.KeepOperatorFlags
	// Apply creates the CRD from the manifest, or updates the live one with
	// KeepOperatorFlags. Status is never written.
	Apply = sample.ApplyCRD
)
