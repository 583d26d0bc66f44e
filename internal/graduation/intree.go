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

// The migration step with Kubernetes' in-tree StorageVersionMigration as the engine.

import (
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/storagemigration"
)

// inTreeEngine drives the in-tree migrator (engine StorageVersionMigration)
// once the storage switch settled: create the StorageVersionMigration of this
// run, follow it while it runs, and have it deleted and created again when it
// Failed (the step fails, so the stall's backoff applies). It lets the plan go
// on to pruning only when the run's own migration Succeeded on this CRD
// generation (ObserveInTree recorded CompletedAt).
func (p *planner) inTreeEngine(s Step, target string) (Step, bool) {
	run := p.status.Migration
	svm := p.in.StorageVersionMigration
	fresh := run == nil || run.StorageVersion != target || run.CRDGeneration != p.crd.Generation || run.StorageVersionMigration == nil
	if !fresh && run.CompletedAt != nil {
		return s, false
	}
	ours := !fresh && svm != nil && svm.UID == run.StorageVersionMigration.UID
	s.Phase = graduatorv1alpha1.PhaseMigrating
	if !ours && storagemigration.CRDMigrating(p.crd) {
		// Someone else's in-tree run (one created by hand): never a second
		// one beside it.
		s.RequeueAfter = inTreePollInterval
		msg := storagemigration.Message(p.crd, nil)
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg)
		return p.finish(s, metav1.ConditionFalse, ReasonInTreeMigrationRunning, "%s", msg), true
	}
	if fresh {
		return p.inTreeStart(s, target)
	}
	name := run.StorageVersionMigration.Name
	switch {
	case run.StorageVersionMigration.Phase == string(storagemigration.Succeeded):
		// The in-tree migrator says it is done; Graduator's engine checks it
		// from the checkpoint taken when the migration was created: objects
		// written since are skipped without a write, any other is
		// rewritten. Only this run completes the migration and allows a
		// prune, whoever pruned storedVersions already.
		s.Action = ActionMigrate
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"the in-tree StorageVersionMigration %s succeeded; verifying that every object was written as %s since it was "+
				"created (Graduator rewrites any it missed): %d listed, %d rewritten, %d skipped so far",
			name, target, run.Listed, run.Rewritten, run.Skipped)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"verifying the in-tree migration of %s to %s", p.crd.Spec.Names.Plural, target), true
	case !ours:
		s.Action = ActionMigrate
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"the in-tree StorageVersionMigration %s of this run is gone; creating it again", name)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"migrating objects to %s with the in-tree StorageVersionMigration %s", target, name), true
	case storagemigration.PhaseOf(svm) == storagemigration.Failed:
		// The in-tree migrator never retries a Failed run: the step deletes
		// it and fails, so that it is created again after the backoff.
		reason, message := storagemigration.FailedMessage(svm)
		s.Action = ActionMigrate
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonInTreeMigrationFailed,
			"the in-tree StorageVersionMigration %s failed (%s): %s; storedVersions is not pruned", name, reason, message)
		return p.finish(s, metav1.ConditionFalse, ReasonInTreeMigrationFailed,
			"the in-tree StorageVersionMigration %s failed (%s): %s; deleting it to create it again", name, reason, message), true
	}
	return p.inTreeFollow(s, target, run, svm), true
}

// inTreeStart plans a new run's StorageVersionMigration, once the storage
// switch has settled.
func (p *planner) inTreeStart(s Step, target string) (Step, bool) {
	name := storagemigration.NameFor(p.crd.Name)
	if wait, ok := p.settling(target); ok {
		s.RequeueAfter = wait.wait
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonSettling,
			"waiting for every API server to store %s before creating the StorageVersionMigration %s: %s", target, name, wait.why)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"the storage version %s is settling: %s; looking again in %s", target, wait.why, wait.wait.Round(time.Second)), true
	}
	s.Action = ActionMigrate
	s.Restart = true
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
		"creating the in-tree StorageVersionMigration %s to rewrite every object as %s", name, target)
	return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
		"migrating objects to %s with the in-tree StorageVersionMigration %s", target, name), true
}

// inTreeFollow follows this run's StorageVersionMigration while it runs (or
// has Succeeded, not yet recorded): a conversion webhook it is stuck on, a
// new run once the webhook is back, or its progress.
func (p *planner) inTreeFollow(s Step, target string, run *graduatorv1alpha1.MigrationStatus,
	svm *svmv1.StorageVersionMigration) Step {
	name := run.StorageVersionMigration.Name
	// Running (or Succeeded, not yet recorded): follow it.
	s.RequeueAfter = inTreeFollowInterval
	if why := p.in.InTreeConversionFailed; why != "" {
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonConversionFailed,
			"the in-tree StorageVersionMigration %s cannot convert objects: %s", name, why)
		return p.finish(s, metav1.ConditionFalse, ReasonConversionFailed,
			"the in-tree StorageVersionMigration %s is stuck on the conversion webhook (it retries by itself; nothing is "+
				"pruned until every object is rewritten): %s", name, why)
	}
	if prev := meta.FindStatusCondition(p.status.Conditions, graduatorv1alpha1.ConditionReady); prev != nil &&
		prev.Reason == ReasonConversionFailed {
		// The webhook converts again, but the in-tree migrator backs off
		// exponentially per retry and may wait many minutes before it
		// tries once more: a new run (a new StorageVersionMigration, from a
		// new checkpoint) starts at once.
		s.Action, s.Restart, s.RequeueAfter = ActionMigrate, true, 0
		p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
			"the conversion webhook answers again; creating the in-tree StorageVersionMigration %s again, since the "+
				"in-tree migrator backs off for minutes after an outage", name)
		return p.finish(s, metav1.ConditionFalse, ReasonInProgress,
			"migrating objects to %s with the in-tree StorageVersionMigration %s, created again after the outage", target, name)
	}
	p.set(graduatorv1alpha1.ConditionMigrated, metav1.ConditionFalse, ReasonMigrating,
		"the in-tree StorageVersionMigration %s is rewriting every %s as %s (%s, created %d times)",
		name, p.crd.Spec.Names.Plural, target, storagemigration.PhaseOf(svm), run.StorageVersionMigration.Created)
	s = p.finish(s, metav1.ConditionFalse, ReasonInProgress,
		"the in-tree StorageVersionMigration %s is migrating objects to %s", name, target)
	if p.in.Attempts > 0 {
		// Created again after a failure: creating it proved nothing, so until
		// it Succeeds Ready keeps saying why the last one failed and the
		// attempts count on (the next failure waits longer).
		s.Retries = p.in.Attempts
		if prev := meta.FindStatusCondition(p.status.Conditions, graduatorv1alpha1.ConditionReady); prev != nil {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{
				Type: prev.Type, Status: prev.Status, Reason: prev.Reason, Message: prev.Message,
			})
		}
		SetProgress(&s.Conditions, s.Phase)
	}
	return s
}

// ObserveInTree records in the run the phase of the in-tree migration it
// follows (engine StorageVersionMigration). Its success does not complete
// the run: Graduator's engine verifies it first (Plan). A migration of
// another UID (an earlier run's, or one made by hand under the same name)
// says nothing of this run; a Succeeded phase, once seen, stays. The status
// is changed in place.
func ObserveInTree(status *graduatorv1alpha1.CRDVersionPolicyStatus, svm *svmv1.StorageVersionMigration) {
	run := status.Migration
	if run == nil || run.StorageVersionMigration == nil || svm == nil || svm.UID != run.StorageVersionMigration.UID ||
		run.StorageVersionMigration.Phase == string(storagemigration.Succeeded) {
		return
	}
	phase := storagemigration.PhaseOf(svm)
	run.StorageVersionMigration.Phase = string(phase)
	run.Progress = string(phase)
}
