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
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
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
// The rights to drive the in-tree migrator (create, get, watch and delete
// storageversionmigrations, engine StorageVersionMigration) are not here
// either: the chart grants them only with inTreeEngine.enabled
// (config/rbac/intree_engine_role.yaml for kustomize); mayMigrate checks them.
//
// The rights to migrate the objects of a CRD (get, list and patch on its
// group) are not here: they come from the graduator-migrate ClusterRole,
// which aggregates every ClusterRole labelled
// graduator.io/aggregate-to-manager: "true" (config/rbac, the Helm chart's
// rbac.migrateGroups). mayMigrate checks them before anything is written.

// Reconcile performs the next steps of one policy's graduation. It reads as
// the graduation does: observe the CRD, plan, perform the step the plan
// names (see steps), and again, until a step has to wait. graduation.Plan
// alone decides the phase and the conditions, a failed step included; the
// status is written once, when Reconcile returns, and after each page of a
// running migration.
func (r *CRDVersionPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	logger := log.FromContext(ctx).WithValues("crd", klog.KRef("", req.Name))
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
	g := &graduationRun{policy: policy, status: newStatusWriter(r.Client, policy)}
	defer func() {
		// Written whatever path returns, also when the manager is stopping.
		err = errors.Join(err, g.status.write(context.WithoutCancel(ctx)))
	}()

	for range maxStepsPerReconcile {
		in, failed := r.observe(ctx, g)
		if failed != nil {
			return r.stalled(ctx, g, in, failed)
		}
		step := graduation.Plan(in)
		r.record(policy, step, in.Now)
		logger.V(1).Info("planned", "action", step.Action, "phase", step.Phase, "reason", step.Reason())
		if step.Action == graduation.ActionNone {
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		}
		if err := r.take(ctx, g, step); err != nil {
			return r.stalled(ctx, g, in, &graduation.StepError{Step: string(step.Action), Err: err})
		}
		def := r.steps()[step.Action]
		if def.check {
			continue // its result is the next plan's input
		}
		if def.recovers == nil || def.recovers(g) {
			r.recovered(g, in, step)
		}
		g.preflight = nil
		// Plan the next step on the policy as it is now: a pause or a new
		// target set while the step ran must stop the graduation here.
		if gone, err := r.refreshSpec(ctx, policy); gone || err != nil {
			return ctrl.Result{}, err
		}
	}
	// Still steps to take: come back at once, through the workqueue so that
	// other CRDs get their turn.
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// graduationRun is what one Reconcile knows of its policy's graduation.
type graduationRun struct {
	policy *graduatorv1alpha1.CRDVersionPolicy
	// crd is the CRD as last read (nil: it does not exist).
	crd *apiextensionsv1.CustomResourceDefinition
	// preflight is the result of this reconcile's preflight, for the next
	// plan.
	preflight *graduation.PreflightResult
	// svm is the in-tree migration named after the CRD as last read (engine
	// StorageVersionMigration; nil: none, or another engine).
	svm    *svmv1.StorageVersionMigration
	status *statusWriter
}

// observe reads what Plan looks at: the CRD (uncached) and whether
// discovery advertises its storage version. A read that fails is returned
// as the step that failed.
func (r *CRDVersionPolicyReconciler) observe(ctx context.Context, g *graduationRun) (graduation.Input, *graduation.StepError) {
	in := graduation.Input{Policy: g.policy, Now: r.now(), Preflight: g.preflight, Attempts: g.policy.Status.Retries}
	g.crd = nil
	crd, err := r.getCRD(ctx, g.policy.Name)
	if err != nil {
		return in, &graduation.StepError{Step: "GetCRD", Err: err}
	}
	g.crd, in.CRD = crd, crd
	graduation.Observe(crd, &g.policy.Status, in.Now)
	if g.svm, err = r.getInTreeMigration(ctx, g.policy, crd); err != nil {
		return in, &graduation.StepError{Step: "GetStorageVersionMigration", Err: err}
	}
	in.StorageVersionMigration = g.svm
	graduation.ObserveInTree(&g.policy.Status, g.svm)
	in.InTreeConversionFailed = r.inTreeConversion(ctx, g.policy, crd, g.svm)
	if in.StorageSettled, err = r.storageSettled(ctx, crd); err != nil {
		return in, &graduation.StepError{Step: graduation.StepDiscovery, Err: err}
	}
	return in, nil
}

// step is how the reconciler carries out one action of graduation.Plan.
type step struct {
	// checkAccess asks the API server first whether the operator may
	// migrate the resource at all (mayMigrate): a denial names the rule to
	// add before anything is switched or written.
	checkAccess bool
	// check marks a step that changes nothing: its result is the next
	// plan's input, so it neither ends a stall nor rereads the spec.
	check bool
	// recovers, when set, says whether the step's success ends a stall;
	// always when nil.
	recovers func(g *graduationRun) bool
	perform  func(ctx context.Context, g *graduationRun, s graduation.Step) error
}

// steps is the graduation as the reconciler performs it: each action Plan
// can return and the function that performs it, in the order a CRD meets
// them.
func (r *CRDVersionPolicyReconciler) steps() map[graduation.Action]step {
	return map[graduation.Action]step{
		graduation.ActionPreflight: {checkAccess: true, check: true, perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			g.preflight = r.preflight(ctx, g.policy, g.crd, s.StorageVersion)
			return nil
		}},
		graduation.ActionSwitchStorage: {perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			return r.switchStorage(ctx, g.crd, s.StorageVersion)
		}},
		graduation.ActionMigrate: {checkAccess: true, recovers: func(g *graduationRun) bool {
			// Creating an in-tree migration again is no sign that the cause
			// of the last failure is gone: the stall lasts until it Succeeds
			// (the plan keeps the attempts while it runs).
			return g.policy.Spec.Migration.Engine != graduatorv1alpha1.EngineStorageVersionMigration
		}, perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			if g.policy.Spec.Migration.Engine == graduatorv1alpha1.EngineStorageVersionMigration && !inTreeSucceeded(g.policy, s) {
				return r.driveInTree(ctx, g, s)
			}
			// Graduator's engine: the migration, or the check of an in-tree
			// one from its checkpoint.
			return r.migrate(ctx, g, s)
		}},
		graduation.ActionPrune: {perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			return r.prune(ctx, g.policy, g.crd, s.StorageVersion)
		}},
		graduation.ActionDeprecate: {perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			return r.deprecate(ctx, g.policy, g.crd, s.Versions)
		}},
		graduation.ActionUnserve: {perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			return r.unserve(ctx, g.crd, s.Versions)
		}},
		graduation.ActionCleanupManagedFields: {perform: func(ctx context.Context, g *graduationRun, s graduation.Step) error {
			return r.cleanupManagedFields(ctx, g.policy, g.crd, s.Versions)
		}},
	}
}

// take performs one step, with one log line when it starts and one when it
// ends.
func (r *CRDVersionPolicyReconciler) take(ctx context.Context, g *graduationRun, s graduation.Step) error {
	def, ok := r.steps()[s.Action]
	if !ok {
		return fmt.Errorf("unknown action %q", s.Action)
	}
	logger := log.FromContext(ctx).WithValues("policy", klog.KObj(g.policy), "step", s.Action, "storageVersion", s.StorageVersion)
	if len(s.Versions) > 0 {
		logger = logger.WithValues("versions", s.Versions)
	}
	logger.Info("step started")
	start := r.now()
	var err error
	if def.checkAccess {
		err = r.mayMigrate(ctx, g.policy, g.crd, s.StorageVersion)
	}
	if err == nil {
		err = def.perform(ctx, g, s)
	}
	done := []any{"duration", r.now().Sub(start).Round(time.Millisecond), "succeeded", err == nil}
	if run := g.policy.Status.Migration; s.Action == graduation.ActionMigrate && run != nil {
		done = append(done, "listed", run.Listed, "rewritten", run.Rewritten, "skipped", run.Skipped, "failed", run.Failed,
			"caughtUp", run.CaughtUp)
	}
	if s.Action == graduation.ActionPreflight && g.preflight != nil {
		done = append(done, "passed", g.preflight.Passed, "reason", g.preflight.Reason)
	}
	logger.Info("step finished", done...)
	return err
}

// stalled records a step (or a read) that failed: Plan, told of the
// failure, keeps the phase and the other conditions and says why in Ready,
// and counts the attempt in status.retries; the policy is retried after a
// backoff (5s doubling to 5m). An Event marks the first failure only, and
// another one the recovery (recovered).
func (r *CRDVersionPolicyReconciler) stalled(ctx context.Context, g *graduationRun, in graduation.Input,
	failed *graduation.StepError) (ctrl.Result, error) {
	if ctx.Err() != nil {
		// The manager is stopping: not a failure of the step.
		return ctrl.Result{}, failed.Err
	}
	in.Failed = failed
	s := graduation.Plan(in)
	r.record(g.policy, s, in.Now)
	stepErrors.WithLabelValues(g.policy.Name, failed.Step, s.Stall.Reason).Inc()
	if s.Retries == 1 {
		r.event(g.policy, g.crd, corev1.EventTypeWarning, s.Stall.Reason, failed.Step, s.Stall.Message)
	}
	log.FromContext(ctx).Error(failed.Err, "step failed; retrying", "policy", klog.KObj(g.policy), "step", failed.Step,
		"reason", s.Stall.Reason, "attempt", s.Retries, "retryAfter", s.Stall.RetryAfter)
	return ctrl.Result{RequeueAfter: s.RequeueAfter}, nil
}

// recovered ends a stall once a step succeeded again: Plan, told there is
// no failure left to report, puts Ready back, and one Event tells the
// recovery.
func (r *CRDVersionPolicyReconciler) recovered(g *graduationRun, in graduation.Input, s graduation.Step) {
	attempts := g.policy.Status.Retries
	if attempts == 0 {
		return
	}
	in.Attempts = 0
	r.record(g.policy, graduation.Plan(in), r.now())
	r.event(g.policy, g.crd, corev1.EventTypeNormal, "Recovered", string(s.Action),
		fmt.Sprintf("%s succeeded again after %d failed attempts", s.Action, attempts))
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

// record puts the plan's phase, conditions and retry count into the
// policy's status (written when Reconcile returns), the phase into the
// metrics, and a phase change into an Event.
func (r *CRDVersionPolicyReconciler) record(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step, now time.Time) {
	previous := policy.Status.Phase
	policy.Status.ObservedGeneration = policy.Generation
	policy.Status.Phase = step.Phase
	policy.Status.Retries = step.Retries
	for _, c := range step.Conditions {
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
	// A policy is named after its CRD, so an event of either enqueues the
	// policy of that name (if there is none, the reconcile finds nothing).
	// Status writes of our own do not wake the policy up; spec edits do.
	return ctrl.NewControllerManagedBy(mgr).
		Named("crdversionpolicy").
		Watches(&graduatorv1alpha1.CRDVersionPolicy{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(r.interrupting(errPolicyChanged), predicate.GenerationChangedPredicate{})).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(r.interrupting(errCRDChanged))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// interrupting stops the running migration of the object's name, between
// two writes, when the object changes generation or is deleted: the next
// plan decides, on fresh reads, whether it resumes, restarts or stops. It
// lets every event through; predicates see each event before it is queued,
// which is when the run must learn of it.
func (r *CRDVersionPolicyReconciler) interrupting(why error) predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				r.runs.interrupt(e.ObjectNew.GetName(), why)
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.runs.interrupt(e.Object.GetName(), why)
			return true
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
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
