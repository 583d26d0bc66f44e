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
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
)

// maxFleetList bounds each list in a fleet's status.
const maxFleetList = graduatorv1alpha1.MaxFleetMembersListed

// The fleet controller creates, updates and deletes the policies it generates.
// +kubebuilder:rbac:groups=graduator.io,resources=crdversionpolicies,verbs=get;list;watch;create;patch;delete

// fleetReconciler carries out selector policies. For every CRD a selector
// selects it keeps a generated policy named after the CRD, in GitOps mode,
// with the selector's migration settings: the per-CRD reconciler then
// preflights, migrates, catches up, prunes and cleans each one, with its
// durable progress, under the manager's limit of graduations at a time. A
// policy the user named after the CRD is never touched; between two
// selectors the older one keeps the CRD.
type fleetReconciler struct {
	Client client.Client
	// Reader reads the selector policy uncached: its status is written
	// under an optimistic lock on what this reconcile read.
	Reader   client.Reader
	Recorder recorder.EventRecorder
}

// Reconcile brings the generated policies of one selector policy in line
// with what it selects, and sums them up in its status.
func (r *fleetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	store := &driver.PolicyStore{Client: r.Client, Reader: r.Reader, Name: req.Name}
	policy, err := store.Load(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if policy == nil {
		// Gone: its generated policies go too (owner references do the
		// same where a garbage collector runs).
		return ctrl.Result{}, r.deleteGenerated(ctx, req.Name, nil)
	}
	if policy.Spec.Selector == nil {
		return ctrl.Result{}, nil
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := r.Client.List(ctx, &crds); err != nil {
		return ctrl.Result{}, fmt.Errorf("list CRDs: %w", err)
	}
	var policies graduatorv1alpha1.CRDVersionPolicyList
	if err := r.Client.List(ctx, &policies); err != nil {
		return ctrl.Result{}, fmt.Errorf("list policies: %w", err)
	}
	byName := map[string]*graduatorv1alpha1.CRDVersionPolicy{}
	for i := range policies.Items {
		byName[policies.Items[i].Name] = &policies.Items[i]
	}

	fleet := &graduatorv1alpha1.FleetStatus{Phases: map[string]int32{}}
	selected := map[string]bool{}
	var stale []string
	var stalled []*graduatorv1alpha1.CRDVersionPolicy
	for i := range crds.Items {
		crd := &crds.Items[i]
		if !selects(policy.Spec.Selector, crd) {
			continue
		}
		selected[crd.Name] = true
		fleet.Selected++
		member, err := r.govern(ctx, policy, crd, byName)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(graduation.StaleStoredVersions(crd)) > 0 {
			stale = append(stale, crd.Name)
			if member.Labels[graduatorv1alpha1.FleetLabel] == policy.Name &&
				meta.IsStatusConditionTrue(member.Status.Conditions, graduatorv1alpha1.ConditionStalled) {
				stalled = append(stalled, member)
			}
		}
		summarize(fleet, crd.Name, policy.Name, member)
	}
	if err := r.deleteGenerated(ctx, policy.Name, selected); err != nil {
		return ctrl.Result{}, err
	}
	err = r.writeStatus(ctx, store, policy, fleet, stale, stalled)
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("the fleet's status changed meanwhile; summing it up again", "error", err.Error())
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, err
}

// govern makes sure the CRD has a policy, and returns it: a new one of the
// fleet's, the fleet's own brought in line, or one it must leave alone.
func (r *fleetReconciler) govern(ctx context.Context, fleetPolicy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, byName map[string]*graduatorv1alpha1.CRDVersionPolicy) (*graduatorv1alpha1.CRDVersionPolicy, error) {
	member := &graduatorv1alpha1.CRDVersionPolicy{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, member, func() error {
		if !claims(fleetPolicy, crd, member, byName) {
			return nil
		}
		r.generate(fleetPolicy, member)
		member.OwnerReferences = nil
		return controllerutil.SetControllerReference(fleetPolicy, member, r.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("create or update the policy of %s for fleet %s: %w", crd.Name, fleetPolicy.Name, err)
	}
	if op == controllerutil.OperationResultCreated {
		log.FromContext(ctx).Info("governing a CRD", "fleet", fleetPolicy.Name, "crd", crd.Name)
	}
	return member, nil
}

// claims reports whether the fleet generates the CRD's policy: a new one,
// its own, or one taken over from a younger or vanished selector. A policy
// of the user's own wins; between two selectors the older one keeps it.
func claims(fleetPolicy *graduatorv1alpha1.CRDVersionPolicy, crd *apiextensionsv1.CustomResourceDefinition,
	existing *graduatorv1alpha1.CRDVersionPolicy, byName map[string]*graduatorv1alpha1.CRDVersionPolicy) bool {
	owner := existing.Labels[graduatorv1alpha1.FleetLabel]
	switch {
	case existing.ResourceVersion == "":
		return true // not created yet
	case owner == "":
		return false // the user's own policy: it wins
	case owner != fleetPolicy.Name:
		other := byName[owner]
		return other == nil || other.Spec.Selector == nil || !selects(other.Spec.Selector, crd) || older(fleetPolicy, other)
	}
	return true
}

// generate sets a generated policy's label and spec: GitOps mode with the
// fleet's settings.
func (r *fleetReconciler) generate(fleetPolicy, child *graduatorv1alpha1.CRDVersionPolicy) {
	if child.Labels == nil {
		child.Labels = map[string]string{}
	}
	child.Labels[graduatorv1alpha1.FleetLabel] = fleetPolicy.Name
	child.Spec = graduatorv1alpha1.CRDVersionPolicySpec{
		Migration:            fleetPolicy.Spec.Migration,
		CleanupManagedFields: fleetPolicy.Spec.CleanupManagedFields,
		Paused:               fleetPolicy.Spec.Paused,
	}
}

// deleteGenerated deletes the fleet's generated policies whose CRD it no
// longer selects (all of them when keep is nil). A migration in flight for
// them stops between two writes (the policy watch interrupts it).
func (r *fleetReconciler) deleteGenerated(ctx context.Context, fleetName string, keep map[string]bool) error {
	var generated graduatorv1alpha1.CRDVersionPolicyList
	if err := r.Client.List(ctx, &generated, client.MatchingLabels{graduatorv1alpha1.FleetLabel: fleetName}); err != nil {
		return fmt.Errorf("list the policies of fleet %s: %w", fleetName, err)
	}
	for i := range generated.Items {
		if keep[generated.Items[i].Name] {
			continue
		}
		if err := r.Client.Delete(ctx, &generated.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the policy of %s for fleet %s: %w", generated.Items[i].Name, fleetName, err)
		}
	}
	return nil
}

// summarize adds one CRD to the fleet's status.
func summarize(fleet *graduatorv1alpha1.FleetStatus, crdName, fleetName string, member *graduatorv1alpha1.CRDVersionPolicy) {
	add := func(list *[]graduatorv1alpha1.FleetMember, message string) {
		if len(*list) < maxFleetList {
			*list = append(*list, graduatorv1alpha1.FleetMember{CRD: crdName, Message: message})
		}
	}
	if member.Labels[graduatorv1alpha1.FleetLabel] != fleetName {
		who := "policy " + member.Name
		if f := member.Labels[graduatorv1alpha1.FleetLabel]; f != "" {
			who = "the older selector policy " + f
		}
		add(&fleet.GovernedElsewhere, "governed by "+who)
		return
	}
	phase := string(member.Status.Phase)
	if phase == "" {
		phase = string(graduatorv1alpha1.PhasePending)
	}
	fleet.Phases[phase]++
	ready := meta.FindStatusCondition(member.Status.Conditions, graduatorv1alpha1.ConditionReady)
	switch {
	case member.Status.Phase == graduatorv1alpha1.PhaseMigrating && member.Status.Migration != nil:
		add(&fleet.Migrating, fmt.Sprintf("%s done/listed", member.Status.Migration.Progress))
	case ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason != graduation.ReasonInProgress &&
		ready.Reason != graduation.ReasonAwaitingManifestChange:
		add(&fleet.Blocked, ready.Reason+": "+ready.Message)
	}
}

// writeStatus records the fleet and the phase and conditions
// graduation.PlanFleet decides, through the policy store: under an
// optimistic lock on the status this reconcile read.
func (r *fleetReconciler) writeStatus(ctx context.Context, store *driver.PolicyStore, policy *graduatorv1alpha1.CRDVersionPolicy,
	fleet *graduatorv1alpha1.FleetStatus, stale []string, stalled []*graduatorv1alpha1.CRDVersionPolicy) error {
	previous := policy.Status.Phase
	phase, conditions := graduation.PlanFleet(graduation.FleetInput{
		Selected: fleet.Selected, Stale: stale, Blocked: len(fleet.Blocked) > 0, Stalled: stalled})
	policy.Status.ObservedGeneration = policy.Generation
	policy.Status.Fleet = fleet
	policy.Status.Phase = phase
	for _, c := range conditions {
		c.ObservedGeneration = policy.Generation
		meta.SetStatusCondition(&policy.Status.Conditions, c)
	}
	if err := store.Save(ctx, policy); err != nil {
		return err
	}
	if previous != phase && r.Recorder != nil {
		ready := meta.FindStatusCondition(policy.Status.Conditions, graduatorv1alpha1.ConditionReady)
		r.Recorder.Eventf(policy, nil, corev1.EventTypeNormal, string(phase), "Fleet", "%s", ready.Message)
	}
	return nil
}

// selects reports whether a selector selects a CRD: its group matches one of
// Groups (exactly, or as a subgroup of a *. wildcard) when Groups is set,
// and its labels match when a label selector is set.
func selects(sel *graduatorv1alpha1.CRDSelector, crd *apiextensionsv1.CustomResourceDefinition) bool {
	if sel == nil {
		return false
	}
	if len(sel.Groups) > 0 && !slices.ContainsFunc(sel.Groups, func(g string) bool { return driver.GroupMatches(g, crd.Spec.Group) }) {
		return false
	}
	if len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0 {
		s, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: sel.MatchLabels, MatchExpressions: sel.MatchExpressions})
		if err != nil || !s.Matches(labels.Set(crd.Labels)) {
			return false
		}
	}
	return len(sel.Groups) > 0 || len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0
}

// older reports whether policy a was created before b (names break ties).
func older(a, b *graduatorv1alpha1.CRDVersionPolicy) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// SetupWithManager watches selector policies, the policies they generate,
// and CRDs (any CRD may start or stop matching).
func (r *fleetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	fleets := func(ctx context.Context) []reconcile.Request {
		var policies graduatorv1alpha1.CRDVersionPolicyList
		if err := r.Client.List(ctx, &policies); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range policies.Items {
			if p.Spec.Selector != nil {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: p.Name}})
			}
		}
		return out
	}
	allFleets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		return fleets(ctx)
	})
	policyEvents := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		p, ok := o.(*graduatorv1alpha1.CRDVersionPolicy)
		switch {
		case !ok:
			return nil
		case p.Spec.Selector != nil:
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p.Name}}}
		case p.Labels[graduatorv1alpha1.FleetLabel] != "":
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p.Labels[graduatorv1alpha1.FleetLabel]}}}
		}
		// A policy of the user's own may have taken a CRD from a fleet.
		return fleets(ctx)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleet").
		Watches(&graduatorv1alpha1.CRDVersionPolicy{}, policyEvents).
		Watches(&apiextensionsv1.CustomResourceDefinition{}, allFleets).
		Complete(r)
}
