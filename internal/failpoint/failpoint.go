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

// Package failpoint holds the pauses with which the robustness suite
// (test/robustness) widens the graduation's shortest stages, so that a fault
// aimed at them from outside can land inside them: at 120 objects the
// round-trip proof, the catch-up sweep and the prune last milliseconds.
//
// A pause does something only in a binary built with `-tags failpoints`,
// and only for the names GRADUATOR_FAILPOINTS gives a duration
// ("proof=1s,sweep=1s"). In every other build Pause is empty: the
// binaries users run carry none of it.
package failpoint

import "context"

// The pauses, at the start of the stage each names.
const (
	// Proof is after the preflight's sample, before the round-trip proof.
	Proof = "proof"
	// Sweep is once the status says the catch-up sweep started, before it
	// reads anything.
	Sweep = "sweep"
	// Prune is before status.storedVersions is pruned.
	Prune = "prune"
)

// Pause waits for the duration the failpoints build gives name, or until
// ctx ends.
func Pause(ctx context.Context, name string) { pause(ctx, name) }
