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
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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
	Discovery discovery.DiscoveryInterface
	Recorder  recorder.EventRecorder
	// Clock is the time source; a real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is how many CRDs graduate at once; 1 when 0.
	MaxConcurrentReconciles int
}

// The operator reads and writes its policies and the CRDs they govern.
// +kubebuilder:rbac:groups=graduator.io,resources=crdversionpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=graduator.io,resources=crdversionpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=get;update;patch
//
// The storage migration rewrites objects of any CRD a policy names, and the
// operator cannot know those resources in advance, so it needs get, list and
// patch on every resource (and patch on /status for writeTo: Status). It
// never creates, updates or deletes them: a merge patch carrying only
// the object's resourceVersion cannot change its content. Narrow this rule to
// your CRDs' groups when you install the operator if you prefer.
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;patch
// +kubebuilder:rbac:groups=*,resources=*/status,verbs=patch

// Reconcile performs the next steps of one policy's graduation.
func (r *CRDVersionPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("crd", req.Name)
	ctx = log.IntoContext(ctx, logger)

	policy := &graduatorv1alpha1.CRDVersionPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, policy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status := newStatusWriter(r.Client, policy)

	var preflight *graduation.PreflightResult
	for range maxStepsPerReconcile {
		crd, err := r.getCRD(ctx, policy.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		now := r.now()
		graduation.Observe(crd, &policy.Status, now)
		settled, err := r.storageSettled(ctx, crd)
		if err != nil {
			return ctrl.Result{}, err
		}
		step := graduation.Plan(graduation.Input{
			CRD: crd, Policy: policy, Now: now, Preflight: preflight, StorageSettled: settled,
		})
		r.record(policy, step, now)
		if err := status.write(ctx); err != nil {
			return ctrl.Result{}, err
		}
		logger.V(1).Info("planned", "action", step.Action, "phase", step.Phase, "reason", step.Reason())

		switch step.Action {
		case graduation.ActionNone:
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		case graduation.ActionPreflight:
			result := r.preflight(ctx, crd, step.StorageVersion)
			preflight = &result
			if !result.Passed {
				r.event(policy, crd, corev1.EventTypeWarning, graduation.ReasonPreflightFailed, "Preflight", result.Message)
			}
			continue
		case graduation.ActionSwitchStorage:
			err = r.switchStorage(ctx, crd, step.StorageVersion)
		case graduation.ActionMigrate:
			err = r.migrate(ctx, policy, status, crd, step)
		case graduation.ActionPrune:
			err = r.prune(ctx, policy, crd, step.StorageVersion)
		case graduation.ActionDeprecate:
			err = r.deprecate(ctx, policy, crd, step.Versions)
		case graduation.ActionUnserve:
			err = r.unserve(ctx, crd, step.Versions)
		case graduation.ActionCleanupManagedFields:
			err = r.cleanupManagedFields(ctx, policy, crd, step.Versions)
		default:
			return ctrl.Result{}, fmt.Errorf("unknown action %q", step.Action)
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				r.event(policy, crd, corev1.EventTypeWarning, string(step.Action)+"Failed", string(step.Action), err.Error())
			}
			// Save what the failed step recorded (e.g. migration progress).
			return ctrl.Result{}, errors.Join(err, status.write(context.WithoutCancel(ctx)))
		}
		preflight = nil
	}
	// Still steps to take: come back at once, through the workqueue so that
	// other CRDs get their turn.
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// getCRD returns the CRD, or nil when it does not exist.
func (r *CRDVersionPolicyReconciler) getCRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get CRD %s: %w", name, err)
	}
	return crd, nil
}

// record writes the step's phase and conditions into the policy's status.
func (r *CRDVersionPolicyReconciler) record(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step, now time.Time) {
	previous := policy.Status.Phase
	policy.Status.ObservedGeneration = policy.Generation
	policy.Status.Phase = step.Phase
	for _, c := range step.Conditions {
		c.ObservedGeneration = policy.Generation
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&policy.Status.Conditions, c)
	}
	for _, phase := range allPhases {
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

var allPhases = []graduatorv1alpha1.Phase{
	graduatorv1alpha1.PhasePending, graduatorv1alpha1.PhasePreflight, graduatorv1alpha1.PhaseSwitchingStorage,
	graduatorv1alpha1.PhaseMigrating, graduatorv1alpha1.PhasePruning, graduatorv1alpha1.PhaseRetiring,
	graduatorv1alpha1.PhaseGraduated, graduatorv1alpha1.PhaseBlocked,
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

// SetupWithManager watches policies and the CRDs they are named after.
func (r *CRDVersionPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := r.MaxConcurrentReconciles
	if workers == 0 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("crdversionpolicy").
		// Status writes of our own do not wake the policy up; spec edits do.
		For(&graduatorv1alpha1.CRDVersionPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A policy is named after its CRD, so a CRD event wakes the policy of
		// the same name (if there is none, the reconcile finds nothing).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, crd client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: crd.GetName()}}}
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
