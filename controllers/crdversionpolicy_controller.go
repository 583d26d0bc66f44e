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

// Package controllers holds Graduator's reconcilers: the CRDVersionPolicy
// reconciler that performs each step of a graduation, and the drift reporter
// that watches CRDs without a policy.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/graduation"
)

// maxStepsPerReconcile bounds how many steps one reconcile takes in a row
// (preflight, switch, migrate, prune, ...), so a CRD that keeps changing
// cannot hold a worker forever.
const maxStepsPerReconcile = 8

// CRDVersionPolicyReconciler walks a CRD through its graduation: it asks
// graduation.Plan for the next step, performs it, records the result in the
// policy's status and asks again, until a step has to wait.
type CRDVersionPolicyReconciler struct {
	Client client.Client
	// APIReader reads CRDs uncached, so a step always plans on the CRD as the
	// previous step left it; the manager's cache when nil.
	APIReader client.Reader
	Dynamic   dynamic.Interface
	// Config, when set, is what the migration engine builds its own client
	// from: object metadata only, and throttling seen at once.
	Config    *rest.Config
	Discovery discovery.DiscoveryInterface
	// Reviews asks the API server what the operator may do (access.Check)
	// before a preflight or a migration writes anything.
	Reviews  authorizationv1client.SelfSubjectAccessReviewInterface
	Recorder recorder.EventRecorder
	// Clock is the time source; a real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is how many CRDs graduate at once; 1 when 0.
	MaxConcurrentReconciles int

	runs runningMigrations
}

// The operator reads and writes its policies and the CRDs they govern: it
// caches both (list, watch), rereads them uncached (get), patches the storage
// flags of spec.versions and prunes status.storedVersions (patch), and asks
// what it may do before migrating (selfsubjectaccessreviews).
// +kubebuilder:rbac:groups=graduator.io,resources=crdversionpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=graduator.io,resources=crdversionpolicies/status,verbs=patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=patch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
//
// The rights to migrate the objects of a CRD (get, list and patch on its
// group) are not here: they come from the graduator-migrate ClusterRole,
// which aggregates every ClusterRole labelled
// graduator.io/aggregate-to-manager: "true" (config/rbac, the Helm chart's
// rbac.migrateGroups). mayMigrate checks them before anything is written.

// Reconcile performs the next steps of one policy's graduation. It reads as
// the graduation does: observe the CRD, plan, perform the step, and again,
// until a step has to wait. A step that fails leaves the phase and the other
// conditions as they were and says why in Ready (see stalled).
func (r *CRDVersionPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("crd", req.Name)
	ctx = log.IntoContext(ctx, logger)

	policy := &graduatorv1alpha1.CRDVersionPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		if apierrors.IsNotFound(err) {
			forgetPolicy(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if policy.Spec.Selector != nil {
		return ctrl.Result{}, nil // a fleet: the FleetReconciler's
	}
	status := newStatusWriter(r.Client, policy)

	var preflight *graduation.PreflightResult
	for range maxStepsPerReconcile {
		crd, err := r.getCRD(ctx, policy.Name)
		if err != nil {
			return r.stalled(ctx, policy, nil, status, "GetCRD", err)
		}
		now := r.now()
		graduation.Observe(crd, &policy.Status, now)
		settled, err := r.storageSettled(ctx, crd)
		if err != nil {
			return r.stalled(ctx, policy, crd, status, graduation.StepDiscovery, err)
		}
		step := graduation.Plan(graduation.Input{
			CRD: crd, Policy: policy, Now: now, Preflight: preflight, StorageSettled: settled,
		})
		r.record(policy, step, now)
		if err := status.write(ctx); err != nil {
			return ctrl.Result{}, err
		}
		logger.V(1).Info("planned", "action", step.Action, "phase", step.Phase, "reason", step.Reason())

		if step.Action == graduation.ActionNone {
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		}
		if step.Action == graduation.ActionPreflight || step.Action == graduation.ActionMigrate {
			// Before anything is switched or written: may the operator
			// migrate this resource at all? A denial names the rule to add.
			if err := r.mayMigrate(ctx, policy, crd, step.StorageVersion); err != nil {
				return r.stalled(ctx, policy, crd, status, string(step.Action), err)
			}
		}
		if step.Action == graduation.ActionPreflight {
			result := r.preflight(ctx, crd, step.StorageVersion, policy.Spec.Migration.WriteTo)
			preflight = &result
			if !result.Passed {
				r.event(policy, crd, corev1.EventTypeWarning, graduation.ReasonPreflightFailed, "Preflight", result.Message)
			}
			continue
		}
		if err := r.perform(ctx, policy, status, crd, step); err != nil {
			return r.stalled(ctx, policy, crd, status, string(step.Action), err)
		}
		r.recovered(policy, crd, step)
		preflight = nil
		// Plan the next step on the policy as it is now: a pause or a new
		// target set while the step ran must stop the graduation here.
		if gone, err := r.refreshSpec(ctx, policy); gone || err != nil {
			return ctrl.Result{}, err
		}
	}
	// Still steps to take: come back at once, through the workqueue so that
	// other CRDs get their turn.
	return ctrl.Result{RequeueAfter: time.Second}, status.write(ctx)
}

// perform carries out one step that changes something.
func (r *CRDVersionPolicyReconciler) perform(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy, status *statusWriter,
	crd *apiextensionsv1.CustomResourceDefinition, step graduation.Step) error {
	switch step.Action {
	case graduation.ActionSwitchStorage:
		return r.switchStorage(ctx, crd, step.StorageVersion)
	case graduation.ActionMigrate:
		return r.migrate(ctx, policy, status, crd, step)
	case graduation.ActionPrune:
		return r.prune(ctx, policy, crd, step.StorageVersion)
	case graduation.ActionDeprecate:
		return r.deprecate(ctx, policy, crd, step.Versions)
	case graduation.ActionUnserve:
		return r.unserve(ctx, crd, step.Versions)
	case graduation.ActionCleanupManagedFields:
		return r.cleanupManagedFields(ctx, policy, crd, step.Versions)
	}
	return fmt.Errorf("unknown action %q", step.Action)
}

// stalled records a step that failed: Ready=False with a reason naming the
// kind of problem and the API server's words, the attempt counted in
// status.retries, and a retry after a backoff (5s doubling to 5m). The phase
// and every other condition stay as they were: the run is not lost. An Event
// marks the first failure only, and another one the recovery.
func (r *CRDVersionPolicyReconciler) stalled(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, status *statusWriter, step string, err error) (ctrl.Result, error) {
	saveCtx := context.WithoutCancel(ctx)
	if ctx.Err() != nil {
		// The manager is stopping: not a failure of the step.
		return ctrl.Result{}, errors.Join(err, status.write(saveCtx))
	}
	policy.Status.Retries++
	stall := graduation.StallOf(step, err, policy.Status.Retries)
	meta.SetStatusCondition(&policy.Status.Conditions, metav1.Condition{
		Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: stall.Reason, Message: stall.Message,
		ObservedGeneration: policy.Generation, LastTransitionTime: metav1.NewTime(r.now()),
	})
	stepErrors.WithLabelValues(policy.Name, step, stall.Reason).Inc()
	if policy.Status.Retries == 1 {
		r.event(policy, crd, corev1.EventTypeWarning, stall.Reason, step, stall.Message)
	}
	log.FromContext(ctx).Error(err, "step failed; retrying", "step", step, "reason", stall.Reason,
		"attempt", policy.Status.Retries, "retryAfter", stall.RetryAfter)
	if werr := status.write(saveCtx); werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	return ctrl.Result{RequeueAfter: stall.RetryAfter}, nil
}

// recovered clears a stall once its step succeeded again: Ready goes back
// to what the plan says, and one Event tells the recovery.
func (r *CRDVersionPolicyReconciler) recovered(policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, step graduation.Step) {
	if policy.Status.Retries == 0 {
		return
	}
	attempts := policy.Status.Retries
	policy.Status.Retries = 0
	if ready := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionReady); ready != nil {
		c := *ready
		c.ObservedGeneration, c.LastTransitionTime = policy.Generation, metav1.NewTime(r.now())
		meta.SetStatusCondition(&policy.Status.Conditions, c)
	}
	r.event(policy, crd, corev1.EventTypeNormal, "Recovered", string(step.Action),
		fmt.Sprintf("%s succeeded again after %d failed attempts", step.Action, attempts))
}

// refreshSpec rereads the policy's spec (uncached: a pause must be seen at
// once) and reports whether the policy is gone.
func (r *CRDVersionPolicyReconciler) refreshSpec(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy) (bool, error) {
	fresh := &graduatorv1alpha1.CRDVersionPolicy{}
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(policy), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("read policy %s: %w", policy.Name, err)
	}
	policy.Spec, policy.Generation = fresh.Spec, fresh.Generation
	return false, nil
}

func (r *CRDVersionPolicyReconciler) reader() client.Reader {
	if r.APIReader == nil {
		return r.Client
	}
	return r.APIReader
}

// getCRD returns the CRD, or nil when it does not exist.
func (r *CRDVersionPolicyReconciler) getCRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.reader().Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get CRD %s: %w", name, err)
	}
	return crd, nil
}

// record writes the step's phase and conditions into the policy's status.
// While a failed step is retried, Ready keeps saying why it failed until the
// step succeeds (recovered) or the plan has nothing to do.
func (r *CRDVersionPolicyReconciler) record(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step, now time.Time) {
	previous := policy.Status.Phase
	policy.Status.ObservedGeneration = policy.Generation
	policy.Status.Phase = step.Phase
	retrying := policy.Status.Retries > 0 && step.Action != graduation.ActionNone
	if policy.Status.Retries > 0 && !retrying {
		// Nothing left to retry (paused, blocked or done).
		policy.Status.Retries = 0
	}
	for _, c := range step.Conditions {
		if retrying && c.Type == graduatorv1alpha1.ConditionReady {
			continue
		}
		c.ObservedGeneration = policy.Generation
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&policy.Status.Conditions, c)
	}
	for _, phase := range graduatorv1alpha1.Phases {
		value := 0.0
		if phase == step.Phase {
			value = 1
		}
		policyPhase.WithLabelValues(policy.Name, string(phase)).Set(value)
	}
	if previous != step.Phase {
		eventType := corev1.EventTypeNormal
		if step.Phase == graduatorv1alpha1.PhaseBlocked {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(policy, nil, eventType, string(step.Phase), "Plan", "%s", step.Message())
	}
}

// event records an Event on the policy and, when it exists, on the CRD.
func (r *CRDVersionPolicyReconciler) event(policy *graduatorv1alpha1.CRDVersionPolicy, crd *apiextensionsv1.CustomResourceDefinition,
	eventType, reason, action, message string) {
	r.Recorder.Eventf(policy, nil, eventType, reason, action, "%s", message)
	if crd != nil {
		r.Recorder.Eventf(crd, policy, eventType, reason, action, "%s", message)
	}
}

func (r *CRDVersionPolicyReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// SetupWithManager watches policies and the CRDs they are named after. A
// spec change of the policy, or a new generation of the CRD, also
// interrupts the policy's running migration between two writes: the next
// plan decides, on fresh reads, whether it resumes, restarts or stops.
func (r *CRDVersionPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := r.MaxConcurrentReconciles
	if workers == 0 {
		workers = 1
	}
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], name string) {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	}
	policyEvents := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object.GetName())
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// Status writes of our own do not wake the policy up; spec edits do.
			if e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() {
				return
			}
			r.runs.interrupt(e.ObjectNew.GetName(), errPolicyChanged)
			enqueue(q, e.ObjectNew.GetName())
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.runs.interrupt(e.Object.GetName(), errPolicyChanged)
			enqueue(q, e.Object.GetName())
		},
	}
	// A policy is named after its CRD, so a CRD event wakes the policy of the
	// same name (if there is none, the reconcile finds nothing).
	crdEvents := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object.GetName())
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				r.runs.interrupt(e.ObjectNew.GetName(), errCRDChanged)
			}
			enqueue(q, e.ObjectNew.GetName())
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.runs.interrupt(e.Object.GetName(), errCRDChanged)
			enqueue(q, e.Object.GetName())
		},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("crdversionpolicy").
		Watches(&graduatorv1alpha1.CRDVersionPolicy{}, policyEvents).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, crdEvents).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// runningMigrations holds the cancel function of each policy's running
// migration, so that an event can stop it between two writes.
type runningMigrations struct {
	mu     sync.Mutex
	cancel map[string]context.CancelCauseFunc
}

func (m *runningMigrations) start(name string, cancel context.CancelCauseFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel == nil {
		m.cancel = map[string]context.CancelCauseFunc{}
	}
	m.cancel[name] = cancel
}

func (m *runningMigrations) done(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cancel, name)
}

func (m *runningMigrations) interrupt(name string, why error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cancel, ok := m.cancel[name]; ok {
		cancel(why)
	}
}
