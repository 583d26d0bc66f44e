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
	"context"
	"fmt"
	"time"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// Finish runs the graduation to its end for a one-shot door (the CLI, the
// rehearsal kit): it performs steps, waits where the plan waits (the
// storage switch settling), and returns once the graduation holds, a step
// fails (no retries: the caller reports it), the plan is blocked, the next
// action is not the door's, or nothing is left to do but wait for time to
// pass (a grace period). It waits at most maxWait in all.
func (d *Driver) Finish(ctx context.Context, store Store, policy *graduatorv1alpha1.CRDVersionPolicy,
	maxWait time.Duration) (Outcome, error) {
	deadline := time.Now().Add(maxWait)
	for {
		out, err := d.Run(ctx, store, policy)
		if err != nil || out.Stall != nil || out.Held {
			return out, err
		}
		switch phase := out.Step.Phase; {
		case out.Step.Action != graduation.ActionNone && out.RequeueAfter > 0:
			continue // Run took its most steps in a row
		case phase == graduatorv1alpha1.PhaseBlocked, phase == graduatorv1alpha1.PhaseGraduated,
			phase == graduatorv1alpha1.PhaseRetiring, out.RequeueAfter == 0:
			return out, nil
		}
		wait := out.RequeueAfter
		if time.Now().Add(wait).After(deadline) {
			return out, fmt.Errorf("%s waited longer than %s: %s", policy.Name, maxWait, out.Step.Message())
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// RunResult is the engine's result of the status' last migration run.
func RunResult(status graduatorv1alpha1.CRDVersionPolicyStatus) migration.Result {
	if status.Migration == nil {
		return migration.Result{}
	}
	p := progressOf(status.Migration)
	p.SpaceBudgetReason = status.Migration.SpaceBudget
	return migration.Result{Progress: p, Complete: status.Migration.CompletedAt != nil}
}
