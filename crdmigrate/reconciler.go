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

	authorizationv1 "k8s.io/api/authorization/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
)

// reconciler is the embedded controller's door to the graduation: each
// selected CRD is a GitOps-mode policy (the CRD's own storage flag is the
// target) whose state the driver keeps in an annotation on the CRD
// (driver.CRDStore), so a restarted manager resumes a run where it stopped,
// and which reports with Events on the CRD.
type reconciler struct {
	client client.Client
	reader client.Reader
	spec   graduatorv1alpha1.CRDVersionPolicySpec
	driver *driver.Driver
	// unsaved holds the graduations this controller may not save on their
	// CRD yet (driver.CRDStore.Unsaved).
	unsaved driver.UnsavedStates
}

// Reconcile hands the CRD's graduation to the driver, once the CRD stores
// more than its storage version or a run of it is unfinished.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	store := &driver.CRDStore{Client: r.client, Reader: r.reader, Spec: r.spec, Name: req.Name, Unsaved: &r.unsaved}
	policy, err := store.Load(ctx)
	if err != nil || policy == nil {
		return ctrl.Result{}, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.reader.Get(ctx, req.NamespacedName, crd); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if run := policy.Status.Migration; len(graduation.StaleStoredVersions(crd)) == 0 && (run == nil || run.CompletedAt != nil) {
		return ctrl.Result{}, nil // nothing to graduate: no state written on the CRD
	}
	out, err := r.driver.Run(ctx, store, policy)
	switch {
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("the graduation's state changed meanwhile; planning again", "error", err.Error())
		return ctrl.Result{Requeue: true}, nil
	case out.Stall != nil && apierrors.IsForbidden(err):
		// The stall names the rules to add (the right to patch the CRD
		// among them); its state waits in r.unsaved, retried with the
		// driver's backoff.
		return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
	}
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, err
}

// needs is what the embedded controller needs beyond migrating the objects:
// write its state on the CRD, prune the CRD's status, and create the Events
// it reports with (Events about a cluster-scoped object go to the default
// namespace).
func needs(crd *apiextensionsv1.CustomResourceDefinition) []authorizationv1.ResourceAttributes {
	return []authorizationv1.ResourceAttributes{
		{Verb: "patch", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Name: crd.Name},
		{Verb: "patch", Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions", Subresource: "status", Name: crd.Name},
		{Verb: "create", Group: eventsv1.GroupName, Resource: "events", Namespace: metav1.NamespaceDefault},
	}
}

// reporter tells the graduation with Events on the CRD: a CRD's status
// conditions belong to the API server's own controllers.
type reporter struct{ recorder recorder.EventRecorder }

func (rep reporter) Event(_ *graduatorv1alpha1.CRDVersionPolicy, crd *apiextensionsv1.CustomResourceDefinition,
	eventType, reason, action, message string) {
	if crd != nil {
		rep.recorder.Eventf(crd, nil, eventType, reason, action, "%s", message)
	}
}

// Planned leaves the phase to the state annotation and the Events: the
// embedded controller has no metrics of its own beside the migration's.
func (reporter) Planned(*graduatorv1alpha1.CRDVersionPolicy, graduation.Step, graduatorv1alpha1.Phase) {
}
