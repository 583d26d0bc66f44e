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
// reconciler that performs each step of a graduation, the fleet reconciler
// of selector policies, and the drift reporter that watches CRDs without a
// policy. It exports what a binary needs to run them (Setup, Options,
// CacheOptions): it is the operator's (cmd/manager), importable but not a
// library, and may change in any release; an operator that graduates its own
// CRDs embeds crdmigrate.
package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/metrics"
	"github.com/graduator/graduator/migration"
)

// policyReconciler is the operator's door to the graduation: it
// hands each policy to the driver (package driver), with the policy's
// status as the place the graduation is kept and conditions, Events and
// metrics as the way it reports.
type policyReconciler struct {
	// Clients are the driver's (driver.ClientsFor): Reader reads policies
	// and CRDs uncached, so a step always plans on the status and the CRD
	// as the previous step left them.
	driver.Clients
	Recorder recorder.EventRecorder
	// Clock is the time source; a real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is how many CRDs graduate at once; 1 when 0.
	MaxConcurrentReconciles int
	// EtcdQuota is etcd's space quota in bytes (--etcd-quota), for
	// policies that set none; 0 when unknown.
	EtcdQuota int64

	driver *driver.Driver
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
// Before a run's first write and before the prune it asks every API server
// whether it serves the new storage version: the kubernetes EndpointSlice of
// namespace default (or, where it cannot be read, the kubernetes Endpoints)
// lists them. Only objects named kubernetes: a Role in default would be moved
// by kustomize's namespace. Without these rights it waits the settle delay
// instead, and says so. Where their addresses cannot be dialled, it asks
// through its own address as often as their number takes, counted by their
// identity Leases in kube-system: list on leases there is in the Role of
// config/rbac/space-ledger, beside the etcd space ledger's rights.
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get,resourceNames=kubernetes
// +kubebuilder:rbac:groups="",resources=endpoints,verbs=get,resourceNames=kubernetes
//
// The rights to drive the in-tree migrator (create, get, watch and delete
// storageversionmigrations, engine StorageVersionMigration) are not here
// either: the chart grants them only with inTreeEngine.enabled
// (config/rbac/intree_engine_role.yaml for kustomize); the driver checks
// them.
//
// The rights to migrate the objects of a CRD (get, list and patch on its
// group) are not here: they come from the graduator-migrate ClusterRole,
// which aggregates every ClusterRole labelled
// graduator.io/aggregate-to-manager: "true" (config/rbac, the Helm chart's
// rbac.migrateGroups). The driver checks them before anything is written.

// Reconcile reads the policy uncached (a plan never starts from a status
// older than the last one written) and lets the driver take its next steps.
func (r *policyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("crd", klog.KRef("", req.Name))
	ctx = log.IntoContext(ctx, logger)

	store := &driver.PolicyStore{Client: r.Client, Reader: r.Reader, Name: req.Name, OnSaved: observePolicy}
	policy, err := store.Load(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if policy == nil {
		forgetPolicy(req.Name)
		return ctrl.Result{}, nil
	}
	if policy.Spec.Selector != nil {
		return ctrl.Result{}, nil // a fleet: the fleetReconciler's
	}
	out, err := r.driver.Run(ctx, store, policy)
	if apierrors.IsConflict(err) {
		// Someone wrote the status since it was read: plan again from it.
		logger.V(1).Info("status changed meanwhile; planning again", "error", err.Error())
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, err
}

// reporter is how the operator tells a graduation: Events on the policy and
// on its CRD, the phase in metrics and in an Event when it changes.
type reporter struct{ recorder recorder.EventRecorder }

func (rep reporter) Event(policy *graduatorv1alpha1.CRDVersionPolicy, crd *apiextensionsv1.CustomResourceDefinition,
	eventType, reason, action, message string) {
	rep.recorder.Eventf(policy, nil, eventType, reason, action, "%s", message)
	if crd != nil {
		rep.recorder.Eventf(crd, policy, eventType, reason, action, "%s", message)
	}
}

func (rep reporter) Planned(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step, previous graduatorv1alpha1.Phase) {
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
		rep.recorder.Eventf(policy, nil, eventType, string(step.Phase), "Plan", "%s", step.Message())
	}
}

// SetupWithManager watches policies and the CRDs they are named after. A
// spec change of the policy, or a new generation of the CRD, also
// interrupts the policy's running migration between two writes: the next
// plan decides, on fresh reads, whether it resumes, restarts or stops.
func (r *policyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.driver = &driver.Driver{
		Clients:   r.Clients,
		Reporter:  reporter{recorder: r.Recorder},
		Metrics:   metrics.Recorder{},
		EtcdQuota: r.EtcdQuota,
		Clock:     r.Clock,
	}
	workers := r.MaxConcurrentReconciles
	if workers == 0 {
		workers = 1
	}
	// A policy is named after its CRD, so an event of either enqueues the
	// policy of that name (if there is none, the reconcile finds nothing).
	// Status writes of our own do not wake the policy up; spec edits do.
	return ctrl.NewControllerManagedBy(mgr).
		Named("crdversionpolicy").
		Watches(&graduatorv1alpha1.CRDVersionPolicy{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(driver.Interrupting(r.driver, driver.ErrPolicyChanged), predicate.GenerationChangedPredicate{})).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(driver.Interrupting(r.driver, migration.ErrCRDChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
