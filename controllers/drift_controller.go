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
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/storagemigration"
)

// driftReporter watches every CRD and reports, as a metric and an Event, a
// stored version that is no longer the storage version: the state that
// blocks removing an old version. It changes nothing; for CRDs without a
// policy it is the only thing Graduator does. A CRD that Kubernetes' in-tree
// StorageVersionMigration is migrating is reported as such (a Normal Event
// with reason InTreeMigrationRunning, graduator_crd_in_tree_migrating 1).
type driftReporter struct {
	Client   client.Client
	Recorder recorder.EventRecorder
}

// Reconcile reports the drift of one CRD.
func (r *driftReporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := r.Client.Get(ctx, req.NamespacedName, &crd); err != nil {
		if apierrors.IsNotFound(err) {
			staleStoredVersions.DeleteLabelValues(req.Name)
			inTreeMigrating.DeleteLabelValues(req.Name)
			policyPhase.DeletePartialMatch(map[string]string{"crd": req.Name})
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get CRD %s: %w", req.Name, err)
	}
	stale := graduation.StaleStoredVersions(&crd)
	staleStoredVersions.WithLabelValues(crd.Name).Set(float64(len(stale)))
	inTreeMigrating.WithLabelValues(crd.Name).Set(boolGauge(storagemigration.CRDMigrating(&crd)))
	if len(stale) == 0 {
		return ctrl.Result{}, nil
	}

	// A CRD with a policy gets its events from the policy's reconciler.
	err := r.Client.Get(ctx, types.NamespacedName{Name: crd.Name}, &graduatorv1alpha1.CRDVersionPolicy{})
	if err == nil {
		return ctrl.Result{}, nil
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get the policy of CRD %s: %w", crd.Name, err)
	}
	eventType, reason, message := driftReport(&crd, stale)
	log.FromContext(ctx).Info("stale stored versions", "crd", klog.KObj(&crd), "stale", stale,
		"storageVersion", graduation.StorageVersion(&crd), "reason", reason)
	r.Recorder.Eventf(&crd, nil, eventType, reason, "ReportDrift", "%s", message)
	return ctrl.Result{}, nil
}

// driftReport is the Event of a CRD without a policy that stores stale
// versions: a warning to act, unless Kubernetes' in-tree migrator is
// migrating it (StorageMigrating at its generation), which prunes the stale
// versions itself when it succeeds.
func driftReport(crd *apiextensionsv1.CustomResourceDefinition, stale []string) (eventType, reason, message string) {
	storage := graduation.StorageVersion(crd)
	if storagemigration.CRDMigrating(crd) {
		return corev1.EventTypeNormal, graduation.ReasonInTreeMigrationRunning, fmt.Sprintf(
			"status.storedVersions lists %s but the storage version is %s: an in-tree StorageVersionMigration is "+
				"migrating %s and prunes status.storedVersions when it succeeds; see `graduator status`",
			strings.Join(stale, ", "), storage, crd.Spec.Names.Plural+"."+crd.Spec.Group)
	}
	return corev1.EventTypeWarning, "StaleStoredVersions", fmt.Sprintf(
		"status.storedVersions lists %s but the storage version is %s: objects may still be stored in the old version, "+
			"which can then not be removed; run `graduator migrate %s --prune` or create a CRDVersionPolicy",
		strings.Join(stale, ", "), storage, crd.Name)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetupWithManager registers the drift reporter.
func (r *driftReporter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("crd-drift").
		For(&apiextensionsv1.CustomResourceDefinition{}).
		Complete(r)
}
