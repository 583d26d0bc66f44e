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

package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/internal/metrics"
	"github.com/graduator/graduator/internal/steps"
	"github.com/graduator/graduator/migration"
)

// Event reasons besides the stall reasons of package graduation.
const (
	// ReasonMigrationStarted: a migration run started (Normal).
	ReasonMigrationStarted = "MigrationStarted"
	// ReasonMigrationCompleted: every object was rewritten or proven done
	// (Normal); the prune follows.
	ReasonMigrationCompleted = "MigrationCompleted"
	// ReasonMigrationFailed: the run reached the end but some objects were
	// refused (Warning, naming them); nothing is pruned, a fresh run
	// follows after the backoff.
	ReasonMigrationFailed = "MigrationFailed"
	// ReasonStoredVersionsPruned: status.storedVersions now lists the
	// storage version only (Normal): the old versions may be dropped.
	ReasonStoredVersionsPruned = "StoredVersionsPruned"
	// ReasonPreflightFailed: the sample read or dry-run write at the
	// storage version was refused; nothing was written.
	ReasonPreflightFailed = graduation.ReasonPreflightFailed
)

// Step names, in Events' action and the step_errors metric.
const (
	stepPreflight = "Preflight"
	stepMigrate   = "Migrate"
	stepPrune     = "Prune"
)

// errCRDChanged stops a run whose CRD changed generation or storage
// version: the next reconcile starts over on the new one.
var errCRDChanged = errors.New("the CRD changed during the migration")

// runState is what the controller remembers of one CRD between reconciles:
// the run it resumes after a stall, and the failures in a row. It lives in
// memory: after a restart a run starts over, which costs little (objects
// already rewritten are cheap to write again), and the invariant holds.
type runState struct {
	name       string
	generation int64
	storage    string
	// seen is when the controller first saw this storage version settled
	// in discovery; the settle delay counts from it.
	seen     time.Time
	progress migration.Progress
	started  time.Time
	attempts int32
}

type reconciler struct {
	opts      Options
	client    client.Client
	reader    client.Reader
	config    *rest.Config
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	reviews   authorizationv1client.SelfSubjectAccessReviewInterface
	recorder  recorder.EventRecorder

	mu   sync.Mutex
	runs map[string]*runState
}

// Reconcile takes the steps of one CRD's graduation in order: wait until
// the storage version settled, check access, preflight, migrate (or resume),
// prune. A step that fails is reported as a stall and retried with backoff.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.reader.Get(ctx, req.NamespacedName, crd); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get CRD %s: %w", req.Name, err)
	}
	if len(graduation.StaleStoredVersions(crd)) == 0 {
		r.forget(crd.Name)
		return ctrl.Result{}, nil
	}
	run := r.state(crd)

	settled, err := steps.StorageSettled(ctx, r.discovery, crd)
	if err != nil {
		return r.stalled(ctx, crd, run, graduation.StepDiscovery, err)
	}
	if !settled {
		run.seen = time.Time{}
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if run.seen.IsZero() {
		run.seen = time.Now()
	}
	if wait := time.Until(run.seen.Add(r.opts.SettleDelay)); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	storage := graduation.StorageVersion(crd)
	if err := r.mayGraduate(ctx, crd, storage); err != nil {
		return r.stalled(ctx, crd, run, stepMigrate, err)
	}
	if run.started.IsZero() {
		if pre := steps.Preflight(ctx, r.dynamic, crd, storage, r.opts.WriteTo); !pre.Passed {
			return r.stalled(ctx, crd, run, stepPreflight, &preflightError{result: pre})
		}
		run.started = time.Now()
		r.event(crd, corev1.EventTypeNormal, ReasonMigrationStarted, stepMigrate,
			fmt.Sprintf("rewriting every %s as %s (stored versions: %s)", crd.Spec.Names.Plural, storage,
				strings.Join(crd.Status.StoredVersions, ", ")))
	}

	result, err := r.migrate(ctx, crd, run)
	if errors.Is(err, errCRDChanged) {
		log.FromContext(ctx).Info("migration interrupted: the CRD changed")
		r.forget(crd.Name)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return r.stalled(ctx, crd, run, stepMigrate, err)
	}
	if !result.Complete {
		return ctrl.Result{}, ctx.Err() // stopping
	}
	metrics.MigrationDuration.WithLabelValues(crd.Name).Observe(time.Since(run.started).Seconds())
	if result.Failed > 0 {
		r.event(crd, corev1.EventTypeWarning, ReasonMigrationFailed, stepMigrate,
			fmt.Sprintf("%d %s could not be rewritten as %s (%s); status.storedVersions is not pruned",
				result.Failed, crd.Spec.Names.Plural, storage, failures(result.Failures)))
		// The next attempt is a fresh run: the failed objects are in no
		// continue token.
		run.progress, run.started = migration.Progress{}, time.Time{}
		return r.stalled(ctx, crd, run, stepMigrate, fmt.Errorf("%d objects not rewritten", result.Failed))
	}
	r.event(crd, corev1.EventTypeNormal, ReasonMigrationCompleted, stepMigrate,
		fmt.Sprintf("%d %s rewritten as %s, %d skipped, %d caught up", result.Rewritten, crd.Spec.Names.Plural,
			storage, result.Skipped, result.CaughtUp))

	before := slices.Clone(crd.Status.StoredVersions)
	err = migration.PruneStoredVersions(ctx, r.client, crd.Name, migration.Expectation{
		StorageVersion: run.storage, Generation: run.generation, Complete: result.Complete, Failed: result.Failed,
	})
	if errors.Is(err, migration.ErrCRDChanged) {
		r.forget(crd.Name)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return r.stalled(ctx, crd, run, stepPrune, fmt.Errorf("prune storedVersions of %s: %w", crd.Name, err))
	}
	r.event(crd, corev1.EventTypeNormal, ReasonStoredVersionsPruned, stepPrune,
		fmt.Sprintf("status.storedVersions pruned from [%s] to [%s]", strings.Join(before, ", "), storage))
	r.forget(crd.Name)
	return ctrl.Result{}, nil
}

// migrate runs the engine from the run's saved progress and keeps the
// progress, so that a run stopped by a stall resumes where it was.
func (r *reconciler) migrate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, run *runState) (migration.Result, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	metrics.MigrationsRunning.Inc()
	defer metrics.MigrationsRunning.Dec()
	counted := run.progress
	result, err := migration.Run(runCtx, r.dynamic, migration.Options{
		Resource:    graduation.ResourceAt(crd, run.storage),
		Config:      r.config,
		Concurrency: r.opts.Concurrency,
		Priority:    r.opts.Priority,
		PageSize:    r.opts.PageSize,
		QPS:         r.opts.QPS,
		WriteTo:     r.opts.WriteTo,
		Resume:      run.progress,
		OnProgress: func(p migration.Progress) {
			metrics.CountProgress(crd.Name, &counted, p)
			metrics.MigrationWriters.WithLabelValues(crd.Name).Set(float64(p.Writers))
			metrics.ObserveProgress(crd.Name, p)
			run.progress = p
			if why := r.invalidated(ctx, run); why != nil {
				cancel(why)
			}
		},
	})
	metrics.CountProgress(crd.Name, &counted, result.Progress)
	if result.Complete {
		metrics.MigrationProgress.WithLabelValues(crd.Name).Set(1)
	}
	if why := context.Cause(runCtx); why != nil && ctx.Err() == nil {
		err = why // a check between pages failed, or the CRD changed
	}
	if err != nil {
		return result, fmt.Errorf("migrate %s to %s: %w", crd.Name, run.storage, err)
	}
	return result, nil
}

// invalidated checks, between pages, that the CRD still has the generation
// and storage version the run started on. A read that fails stops the run
// too: it cannot be known to be right.
func (r *reconciler) invalidated(ctx context.Context, run *runState) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: run.name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return errCRDChanged
		}
		return fmt.Errorf("reread CRD %s: %w", run.name, err)
	}
	if crd.Generation != run.generation || graduation.StorageVersion(crd) != run.storage {
		return errCRDChanged
	}
	return nil
}

// mayGraduate checks every right a graduation of crd needs beyond what the
// controller runs on: list, get and patch its objects (access.Needs), patch
// the CRD's status to prune it, and create the Events it reports with.
func (r *reconciler) mayGraduate(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	needs := append(accessNeeds(crd, version, r.opts.WriteTo),
		authorizationv1.ResourceAttributes{
			Verb: "patch", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions",
			Subresource: "status", Name: crd.Name,
		},
		// Events about a cluster-scoped object go to the default namespace.
		authorizationv1.ResourceAttributes{
			Verb: "create", Group: eventsv1.GroupName, Resource: "events", Namespace: metav1.NamespaceDefault,
		})
	missing, err := missingRights(ctx, r.reviews, needs)
	if err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	if len(missing) > 0 {
		return &Forbidden{Missing: missing}
	}
	return nil
}

// stalled reports a failed step: an Event with the stall reason on the
// first failure and whenever the reason changes, the step_errors metric,
// and a requeue after the backoff. The run's progress is kept.
func (r *reconciler) stalled(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, run *runState,
	step string, err error) (ctrl.Result, error) {
	if ctx.Err() != nil {
		return ctrl.Result{}, nil // the manager is stopping: not a stall
	}
	run.attempts++
	stall := graduation.StallOf(step, err, run.attempts)
	var pre *preflightError
	if errors.As(err, &pre) {
		stall.Reason = ReasonPreflightFailed
	}
	metrics.StepErrors.WithLabelValues(crd.Name, step, stall.Reason).Inc()
	log.FromContext(ctx).Info("graduation stalled", "step", step, "reason", stall.Reason, "error", err.Error(),
		"attempt", run.attempts, "retryAfter", stall.RetryAfter)
	r.event(crd, corev1.EventTypeWarning, stall.Reason, step, stall.Message)
	return ctrl.Result{RequeueAfter: stall.RetryAfter}, nil
}

func (r *reconciler) event(crd *apiextensionsv1.CustomResourceDefinition, eventType, reason, action, message string) {
	r.recorder.Eventf(crd, nil, eventType, reason, action, "%s", message)
}

// state returns the run state of crd, a fresh one when the CRD's
// generation or storage version is not the one it was for.
func (r *reconciler) state(crd *apiextensionsv1.CustomResourceDefinition) *runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	storage := graduation.StorageVersion(crd)
	run := r.runs[crd.Name]
	if run == nil || run.generation != crd.Generation || run.storage != storage {
		run = &runState{generation: crd.Generation, storage: storage, name: crd.Name}
		r.runs[crd.Name] = run
	}
	return run
}

func (r *reconciler) forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, name)
}

func failures(fs []migration.Failure) string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	return strings.Join(out, "; ")
}

// preflightError is a preflight that did not pass.
type preflightError struct{ result graduation.PreflightResult }

func (e *preflightError) Error() string { return e.result.Reason + ": " + e.result.Message }
