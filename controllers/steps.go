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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graduator/graduator/access"
	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/errclass"
	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/internal/metrics"
	"github.com/graduator/graduator/internal/steps"
	"github.com/graduator/graduator/migration"
	"github.com/graduator/graduator/storagemigration"
)

// preflight reads a sample of objects at the target version, which makes the
// API server convert them (exercising the conversion webhook), and writes
// them back as a dry run, which exercises validation and admission, before
// anything is changed. The dry run takes the path the migration will take:
// the same subresource, the same patch and preconditions.
// A failed preflight is also told in an Event.
func (r *CRDVersionPolicyReconciler) preflight(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, target string) *graduation.PreflightResult {
	result := r.samplePreflight(ctx, crd, target, policy.Spec.Migration.WriteTo)
	if !result.Passed {
		r.event(policy, crd, corev1.EventTypeWarning, graduation.ReasonPreflightFailed, "Preflight", result.Message)
	}
	return &result
}

func (r *CRDVersionPolicyReconciler) samplePreflight(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string,
	writeTo graduatorv1alpha1.WriteTarget) graduation.PreflightResult {
	return steps.Preflight(ctx, r.Dynamic, crd, target, writeTo)
}

// mayMigrate asks the API server whether the operator may list, read and
// patch the CRD's objects at version (and their /status for writeTo:
// Status). A denial is an access.Denied, which names the RBAC rule to add and
// stalls the policy with reason Forbidden before anything is switched or
// written. Engine StorageVersionMigration also needs a server that serves it
// (1.37+): an older one stalls it with reason InTreeMigrationUnavailable.
func (r *CRDVersionPolicyReconciler) mayMigrate(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	if err := steps.MayMigrate(ctx, r.Reviews, crd, version, policy.Spec.Migration.WriteTo); err != nil {
		return err
	}
	if policy.Spec.Migration.Engine == graduatorv1alpha1.EngineStorageVersionMigration {
		if err := storagemigration.Served(r.Discovery); err != nil {
			return err
		}
		if err := access.CheckInTree(ctx, r.Reviews); err != nil {
			return fmt.Errorf("check access: %w", err)
		}
	}
	return nil
}

// getInTreeMigration reads, uncached, the StorageVersionMigration named
// after the CRD when the policy's engine is StorageVersionMigration and the
// CRD still stores an old version, or the run has not recorded its outcome
// yet (the in-tree migrator prunes as soon as it succeeded); nil when there
// is none. Uncached, because the operator does not watch them: the API is
// 1.37's, and the right to read it is granted only with the engine.
func (r *CRDVersionPolicyReconciler) getInTreeMigration(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition) (*svmv1.StorageVersionMigration, error) {
	if policy.Spec.Migration.Engine != graduatorv1alpha1.EngineStorageVersionMigration {
		return nil, nil
	}
	run := policy.Status.Migration
	unrecorded := run != nil && run.StorageVersionMigration != nil && run.CompletedAt == nil
	if len(graduation.StaleStoredVersions(crd)) == 0 && !unrecorded {
		return nil, nil
	}
	svm := &svmv1.StorageVersionMigration{}
	name := storagemigration.NameFor(crd.Name)
	if err := r.reader().Get(ctx, client.ObjectKey{Name: name}, svm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get StorageVersionMigration %s: %w", name, err)
	}
	return svm, nil
}

// inTreeConversion reads a few objects at the storage version and at each
// old version the CRD still stores and serves while this run's in-tree
// migration runs, and returns what the conversion webhook said when it
// failed to convert them: objects not rewritten yet need it to be read at
// the new version, objects rewritten already to be read at an old one, so
// the same objects read both ways meet one or the other. Each object is
// read with a GET, which decodes what etcd holds: a LIST may be served from
// the watch cache, whose objects were converted when they were written. The
// in-tree migrator retries conversion errors as long as they last and its
// status does not tell them, so this is how Ready can. Empty otherwise.
func (r *CRDVersionPolicyReconciler) inTreeConversion(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, svm *svmv1.StorageVersionMigration) string {
	run := policy.Status.Migration
	if svm == nil || run == nil || run.StorageVersionMigration == nil || svm.UID != run.StorageVersionMigration.UID ||
		storagemigration.PhaseOf(svm) != storagemigration.Running {
		return ""
	}
	storage := graduation.StorageVersion(crd)
	sample, err := r.Dynamic.Resource(graduation.ResourceAt(crd, storage)).List(ctx, metav1.ListOptions{Limit: steps.PreflightSample})
	if err != nil {
		log.FromContext(ctx).V(1).Info("sample list while the in-tree migration runs", "error", err.Error())
		return ""
	}
	for _, version := range append([]string{storage}, graduation.StaleStoredVersions(crd)...) {
		if !served(crd, version) {
			continue
		}
		for _, obj := range sample.Items {
			_, err := r.Dynamic.Resource(graduation.ResourceAt(crd, version)).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
			if errclass.IsConversionError(err) {
				return fmt.Sprintf("reading %s at %s: %v", klog.KObj(&obj), version, err)
			}
		}
	}
	return ""
}

// served reports whether the CRD serves version.
func served(crd *apiextensionsv1.CustomResourceDefinition, version string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			return v.Served
		}
	}
	return false
}

// driveInTree carries out the migration with the in-tree migrator (engine
// StorageVersionMigration): it creates this run's StorageVersionMigration,
// and creates it again when it is gone or Failed. A Failed one is deleted
// and the step fails with the in-tree migrator's words, so that the stall's
// backoff spaces the new tries and Ready says why. Following a running one
// is the plan's (it requeues); nothing here waits.
func (r *CRDVersionPolicyReconciler) driveInTree(ctx context.Context, g *graduationRun, step graduation.Step) error {
	policy, crd := g.policy, g.crd
	run := policy.Status.Migration
	if step.Restart || run == nil || run.StorageVersionMigration == nil {
		started := metav1.NewTime(r.now())
		run = &graduatorv1alpha1.MigrationStatus{
			CRDGeneration: crd.Generation, StorageVersion: step.StorageVersion, StartedAt: &started,
			StorageVersionMigration: &graduatorv1alpha1.InTreeMigration{Name: storagemigration.NameFor(crd.Name)},
		}
		// The checkpoint the in-tree run is checked from once it says it
		// succeeded: the switch has settled, so whatever is written after it
		// is stored in the new version.
		list, err := r.Dynamic.Resource(graduation.ResourceAt(crd, step.StorageVersion)).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("take the checkpoint of %s: %w", crd.Name, err)
		}
		run.ResourceVersion = list.GetResourceVersion()
		policy.Status.Migration = run
		r.event(policy, crd, corev1.EventTypeNormal, "MigrationStarted", "Migrate",
			fmt.Sprintf("rewriting every %s as %s with the in-tree StorageVersionMigration %s",
				crd.Spec.Names.Plural, step.StorageVersion, run.StorageVersionMigration.Name))
	}
	ref := run.StorageVersionMigration
	if existing := g.svm; existing != nil {
		phase := storagemigration.PhaseOf(existing)
		if existing.UID == ref.UID && phase != storagemigration.Failed {
			return nil // this run's, still running or done: the plan follows it
		}
		// Failed, or not this run's (an earlier run's under the same name):
		// delete exactly that one, whoever recreated it meanwhile.
		if err := r.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete StorageVersionMigration %s: %w", existing.Name, err)
		}
		g.svm = nil
		if existing.UID == ref.UID {
			reason, message := storagemigration.FailedMessage(existing)
			ref.Phase, run.Progress = string(phase), string(phase)
			return &storagemigration.FailedError{Name: existing.Name, Reason: reason, Message: message}
		}
	}
	svm := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ref.Name,
			Labels: map[string]string{storagemigration.ManagedByLabel: storagemigration.ManagedBy},
		},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: storagemigration.ResourceOf(crd)},
	}
	// Owned, so that deleting the policy deletes it (the garbage collector);
	// not blocking the owner's deletion, which would need the right to
	// update the policy's finalizers.
	if err := controllerutil.SetOwnerReference(policy, svm, r.Client.Scheme()); err != nil {
		return fmt.Errorf("own StorageVersionMigration %s: %w", ref.Name, err)
	}
	if err := r.Client.Create(ctx, svm); err != nil {
		return fmt.Errorf("create StorageVersionMigration %s for %s: %w", ref.Name, crd.Name, err)
	}
	ref.UID, ref.Phase, ref.Created = svm.UID, string(storagemigration.Running), ref.Created+1
	run.Progress = string(storagemigration.Running)
	log.FromContext(ctx).Info("created the in-tree StorageVersionMigration", "storageVersionMigration", klog.KObj(svm),
		"created", ref.Created)
	return nil
}

// storageSettled reports whether API discovery advertises the CRD's current
// storage version. Discovery can show the new hash while the server still
// writes the old version (kubernetes #130235), which is why the plan also
// waits for the settle delay.
func (r *CRDVersionPolicyReconciler) storageSettled(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	return steps.StorageSettled(ctx, r.Discovery, crd)
}

// switchStorage makes target the storage version. Only the storage flags
// change; the optimistic lock makes a concurrent edit of the CRD fail the
// write instead of being overwritten.
func (r *CRDVersionPolicyReconciler) switchStorage(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, target string) error {
	from := graduation.StorageVersion(crd)
	if err := r.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		v.Storage = v.Name == target
	}); err != nil {
		return fmt.Errorf("switch the storage version of %s to %s: %w", crd.Name, target, err)
	}
	r.Recorder.Eventf(crd, nil, corev1.EventTypeNormal, "StorageVersionSwitched", "SwitchStorage",
		"the storage version is now %s (was %s)", target, from)
	return nil
}

// deprecate marks versions deprecated with the policy's warnings.
func (r *CRDVersionPolicyReconciler) deprecate(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, versions []string) error {
	warnings := map[string]*string{}
	for _, d := range policy.Spec.Deprecate {
		if d.Warning != "" {
			w := d.Warning
			warnings[d.Version] = &w
		}
	}
	if err := r.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		if slices.Contains(versions, v.Name) {
			v.Deprecated = true
			v.DeprecationWarning = warnings[v.Name]
		}
	}); err != nil {
		return fmt.Errorf("deprecate %s of %s: %w", strings.Join(versions, ", "), crd.Name, err)
	}
	r.event(policy, crd, corev1.EventTypeNormal, "VersionsDeprecated", "Deprecate",
		fmt.Sprintf("marked %s deprecated", strings.Join(versions, ", ")))
	return nil
}

// unserve stops serving versions. It checks the invariant again at the last
// moment: never the storage version, never a version still stored.
func (r *CRDVersionPolicyReconciler) unserve(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, versions []string) error {
	for _, v := range versions {
		if v == graduation.StorageVersion(crd) || slices.Contains(crd.Status.StoredVersions, v) {
			return fmt.Errorf("refusing to unserve %s of %s: it is the storage version or still stored", v, crd.Name)
		}
	}
	if err := r.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		if slices.Contains(versions, v.Name) {
			v.Served = false
		}
	}); err != nil {
		return fmt.Errorf("unserve %s of %s: %w", strings.Join(versions, ", "), crd.Name, err)
	}
	r.Recorder.Eventf(crd, nil, corev1.EventTypeNormal, "VersionsUnserved", "Unserve",
		"%s no longer served; set served: true to roll back", strings.Join(versions, ", "))
	return nil
}

// patchVersions changes flags of spec.versions. spec.versions is an atomic
// list, so the whole list is written, under an optimistic lock.
func (r *CRDVersionPolicyReconciler) patchVersions(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition,
	change func(*apiextensionsv1.CustomResourceDefinitionVersion)) error {
	updated := crd.DeepCopy()
	for i := range updated.Spec.Versions {
		change(&updated.Spec.Versions[i])
	}
	return r.Client.Patch(ctx, updated, client.MergeFromWithOptions(crd, client.MergeFromWithOptimisticLock{}))
}

// migrate runs or resumes the storage migration, saving its progress in the
// policy's status after every page so that a restarted operator resumes from
// the last saved continue token.
func (r *CRDVersionPolicyReconciler) migrate(ctx context.Context, g *graduationRun, step graduation.Step) error {
	policy, crd := g.policy, g.crd
	logger := log.FromContext(ctx)
	run := policy.Status.Migration
	if step.Restart || run == nil {
		started := metav1.NewTime(r.now())
		run = &graduatorv1alpha1.MigrationStatus{
			CRDGeneration: crd.Generation, StorageVersion: step.StorageVersion, StartedAt: &started,
		}
		policy.Status.Migration = run
		r.event(policy, crd, corev1.EventTypeNormal, "MigrationStarted", "Migrate",
			fmt.Sprintf("rewriting every %s as %s", crd.Spec.Names.Plural, step.StorageVersion))
	} else {
		logger.Info("resuming the migration", "continue", run.ContinueToken != "", "listed", run.Listed)
	}

	settings := policy.Spec.Migration
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.runs.start(policy.Name, cancel)
	defer r.runs.done(policy.Name)
	migrationsRunning.Inc()
	defer migrationsRunning.Dec()
	counted := progressOf(run)
	opts := migration.Options{
		Resource:    graduation.ResourceAt(crd, step.StorageVersion),
		Config:      r.Config,
		Concurrency: int(settings.Concurrency),
		PageSize:    settings.PageSize,
		QPS:         float32(settings.QPS),
		WriteTo:     settings.WriteTo,
		Priority:    migration.Priority(settings.Priority),
		Resume:      progressOf(run),
		MaxFailures: 20,
		OnProgress: func(p migration.Progress) {
			r.countProgress(crd.Name, &counted, p)
			migrationWriters.WithLabelValues(crd.Name).Set(float64(p.Writers))
			observeProgress(crd.Name, p)
			recordProgress(run, p)
			// Conditions follow the run as it goes: objects rejected so far
			// show in Ready at once, not only when the run ends. A page went
			// through, so a stall is over (Attempts 0): the run moves again.
			now := r.now()
			r.recovered(g, graduation.Input{CRD: crd, Policy: policy, Now: now, StorageSettled: true}, step)
			r.record(policy, graduation.Plan(graduation.Input{CRD: crd, Policy: policy, Now: now, StorageSettled: true}), now)
			if err := g.status.write(ctx); err != nil {
				logger.Error(err, "saving migration progress")
			}
			if why := r.runInvalidated(ctx, policy, run); why != nil {
				cancel(why)
			}
		},
	}
	result, err := migration.Run(runCtx, r.Dynamic, opts)
	r.countProgress(crd.Name, &counted, result.Progress)
	recordProgress(run, result.Progress)
	if result.Complete {
		migrationProgress.WithLabelValues(crd.Name).Set(1)
	}
	if why := context.Cause(runCtx); errors.Is(why, errCRDChanged) || errors.Is(why, errPolicyChanged) {
		// The CRD or the policy changed: the next plan decides what follows.
		logger.Info("migration interrupted", "reason", why.Error())
		return nil
	} else if why != nil && ctx.Err() == nil {
		err = why // a check between pages failed
	}
	if err != nil {
		return fmt.Errorf("migrate %s to %s: %w", crd.Name, step.StorageVersion, err)
	}
	if result.Complete {
		completed := metav1.NewTime(r.now())
		run.CompletedAt = &completed
		run.ContinueToken = ""
		migrationDuration.WithLabelValues(crd.Name).Observe(completed.Sub(run.StartedAt.Time).Seconds())
		eventType, reason := corev1.EventTypeNormal, "MigrationCompleted"
		if run.Failed > 0 {
			eventType, reason = corev1.EventTypeWarning, "MigrationFailed"
		}
		r.event(policy, crd, eventType, reason, "Migrate", fmt.Sprintf("%d %s rewritten as %s, %d skipped, %d failed",
			run.Rewritten, crd.Spec.Names.Plural, step.StorageVersion, run.Skipped, run.Failed))
	}
	return nil
}

// inTreeSucceeded reports a run whose in-tree migration succeeded: what is
// left is Graduator's check of it (migrate, from the run's checkpoint).
func inTreeSucceeded(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step) bool {
	run := policy.Status.Migration
	return !step.Restart && run != nil && run.StorageVersionMigration != nil &&
		run.StorageVersionMigration.Phase == string(storagemigration.Succeeded)
}

// errCRDChanged and errPolicyChanged stop a run whose premise no longer holds.
var (
	errCRDChanged    = errors.New("the CRD changed during the migration")
	errPolicyChanged = errors.New("the policy was changed, paused or deleted")
)

// runInvalidated checks, between pages, that the run still migrates the
// right thing: the CRD generation and storage version it started on, and a
// policy that is neither paused nor retargeted. The watches interrupt a run
// at once; this check also covers an event the watch missed. A read that
// fails stops the run too: it cannot be known to be right.
func (r *CRDVersionPolicyReconciler) runInvalidated(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	run *graduatorv1alpha1.MigrationStatus) error {
	crd, err := r.getCRD(ctx, policy.Name)
	if err != nil {
		return err
	}
	if crd == nil || crd.Generation != run.CRDGeneration || graduation.StorageVersion(crd) != run.StorageVersion {
		return errCRDChanged
	}
	var current graduatorv1alpha1.CRDVersionPolicy
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(policy), &current); err != nil {
		if apierrors.IsNotFound(err) {
			return errPolicyChanged
		}
		return fmt.Errorf("read policy %s: %w", policy.Name, err)
	}
	if current.Generation != policy.Generation {
		return errPolicyChanged
	}
	return nil
}

func progressOf(run *graduatorv1alpha1.MigrationStatus) migration.Progress {
	p := migration.Progress{
		Checkpoint:        run.ResourceVersion,
		Continue:          run.ContinueToken,
		CatchUp:           run.CatchUp,
		CatchUpCheckpoint: run.CatchUpResourceVersion,
		CaughtUp:          run.CaughtUp,
		Listed:            run.Listed,
		Rewritten:         run.Rewritten,
		Skipped:           run.Skipped,
		Failed:            run.Failed,
	}
	for _, f := range run.Failures {
		p.Failures = append(p.Failures, migration.Failure{Namespace: f.Namespace, Name: f.Name, Reason: f.Reason})
	}
	return p
}

func recordProgress(run *graduatorv1alpha1.MigrationStatus, p migration.Progress) {
	run.ResourceVersion = p.Checkpoint
	run.ContinueToken = p.Continue
	run.CatchUp, run.CatchUpResourceVersion, run.CaughtUp = p.CatchUp, p.CatchUpCheckpoint, p.CaughtUp
	run.Writers, run.WritersReason = int32(p.Writers), string(p.WritersReason)
	run.Listed, run.Rewritten, run.Skipped, run.Failed = p.Listed, p.Rewritten, p.Skipped, p.Failed
	run.Progress = fmt.Sprintf("%d/%d", p.Rewritten+p.Skipped+p.Failed, p.Listed)
	run.Failures = nil
	for _, f := range p.Failures {
		reason := f.Reason
		if len(reason) > 1000 {
			reason = reason[:1000] + "..."
		}
		run.Failures = append(run.Failures, graduatorv1alpha1.MigrationFailure{Namespace: f.Namespace, Name: f.Name, Reason: reason})
	}
}

// countProgress adds to the metrics what p shows beyond what was counted.
func (r *CRDVersionPolicyReconciler) countProgress(crd string, counted *migration.Progress, p migration.Progress) {
	metrics.CountProgress(crd, counted, p)
}

// prune sets status.storedVersions to the storage version, refused by the
// engine when the CRD changed since the run started.
func (r *CRDVersionPolicyReconciler) prune(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, target string) error {
	run := policy.Status.Migration
	before := slices.Clone(crd.Status.StoredVersions)
	err := migration.PruneStoredVersions(ctx, r.Client, crd.Name, migration.Expectation{
		StorageVersion: target, Generation: run.CRDGeneration, Complete: run.CompletedAt != nil, Failed: run.Failed,
	})
	if err != nil {
		return fmt.Errorf("prune storedVersions of %s: %w", crd.Name, err)
	}
	r.event(policy, crd, corev1.EventTypeNormal, "StoredVersionsPruned", "Prune",
		fmt.Sprintf("status.storedVersions pruned from [%s] to [%s]", strings.Join(before, ", "), target))
	return nil
}

// cleanupManagedFields drops managedFields entries of versions that are no
// longer served from every object: they would break later server-side applies.
func (r *CRDVersionPolicyReconciler) cleanupManagedFields(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, versions []string) error {
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	cleaned, err := migration.CleanupManagedFields(ctx, r.Dynamic, graduation.ResourceAt(crd, graduation.StorageVersion(crd)), served)
	if err != nil {
		return fmt.Errorf("clean managedFields of %s: %w", crd.Name, err)
	}
	for i := range policy.Status.Versions {
		if slices.Contains(versions, policy.Status.Versions[i].Name) {
			policy.Status.Versions[i].ManagedFieldsCleaned = true
		}
	}
	r.event(policy, crd, corev1.EventTypeNormal, "ManagedFieldsCleaned", "CleanupManagedFields",
		fmt.Sprintf("removed managedFields entries of %s from %d objects", strings.Join(versions, ", "), cleaned))
	return nil
}
