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

package driver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/storagemigration"
)

// getInTreeMigration reads, uncached, the StorageVersionMigration named
// after the CRD when the policy's engine is StorageVersionMigration and the
// CRD still stores an old version, or the run has not recorded its outcome
// yet (the in-tree migrator prunes as soon as it succeeded); nil when there
// is none. Uncached, because the operator does not watch them: the API is
// 1.37's, and the right to read it is granted only with the engine.
func (d *Driver) getInTreeMigration(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition) (*svmv1.StorageVersionMigration, error) {
	if policy.Spec.Migration.Engine != graduatorv1alpha1.EngineStorageVersionMigration {
		return nil, nil
	}
	mr := policy.Status.Migration
	unrecorded := mr != nil && mr.StorageVersionMigration != nil && mr.CompletedAt == nil
	if len(graduation.StaleStoredVersions(crd)) == 0 && !unrecorded {
		return nil, nil
	}
	svm := &svmv1.StorageVersionMigration{}
	name := storagemigration.NameFor(crd.Name)
	if err := d.Reader.Get(ctx, client.ObjectKey{Name: name}, svm); err != nil {
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
func (d *Driver) inTreeConversion(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, svm *svmv1.StorageVersionMigration) string {
	mr := policy.Status.Migration
	if svm == nil || mr == nil || mr.StorageVersionMigration == nil || svm.UID != mr.StorageVersionMigration.UID ||
		storagemigration.PhaseOf(svm) != storagemigration.Running {
		return ""
	}
	storage := graduation.StorageVersion(crd)
	sample, err := d.Dynamic.Resource(graduation.ResourceAt(crd, storage)).List(ctx, metav1.ListOptions{Limit: PreflightSample})
	if err != nil {
		log.FromContext(ctx).V(1).Info("sample list while the in-tree migration runs", "error", err.Error())
		return ""
	}
	for _, version := range append([]string{storage}, graduation.StaleStoredVersions(crd)...) {
		if !served(crd, version) {
			continue
		}
		for _, obj := range sample.Items {
			_, err := d.Dynamic.Resource(graduation.ResourceAt(crd, version)).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
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
func (d *Driver) driveInTree(ctx context.Context, g *run, step graduation.Step) error {
	policy, crd := g.policy, g.crd
	mr := policy.Status.Migration
	if step.Restart || mr == nil || mr.StorageVersionMigration == nil {
		started := metav1.NewTime(d.now())
		mr = &graduatorv1alpha1.MigrationStatus{
			CRDGeneration: crd.Generation, StorageVersion: step.StorageVersion, StartedAt: &started,
			StorageVersionMigration: &graduatorv1alpha1.InTreeMigration{Name: storagemigration.NameFor(crd.Name)},
		}
		// The checkpoint the in-tree run is checked from once it says it
		// succeeded: the switch has settled, so whatever is written after it
		// is stored in the new version.
		list, err := d.Dynamic.Resource(graduation.ResourceAt(crd, step.StorageVersion)).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("take the checkpoint of %s: %w", crd.Name, err)
		}
		mr.ResourceVersion = list.GetResourceVersion()
		recordServers(mr, g)
		policy.Status.Migration = mr
		d.Reporter.Event(policy, crd, corev1.EventTypeNormal, ReasonMigrationStarted, "Migrate",
			fmt.Sprintf("rewriting every %s as %s with the in-tree StorageVersionMigration %s",
				crd.Spec.Names.Plural, step.StorageVersion, mr.StorageVersionMigration.Name))
	}
	ref := mr.StorageVersionMigration
	if existing := g.svm; existing != nil {
		phase := storagemigration.PhaseOf(existing)
		if existing.UID == ref.UID && phase != storagemigration.Failed {
			return nil // this mr's, still running or done: the plan follows it
		}
		// Failed, or not this run's (an earlier run's under the same name):
		// delete exactly that one, whoever recreated it meanwhile.
		if err := d.Client.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete StorageVersionMigration %s: %w", existing.Name, err)
		}
		g.svm = nil
		if existing.UID == ref.UID {
			reason, message := storagemigration.FailedMessage(existing)
			ref.Phase, mr.Progress = string(phase), string(phase)
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
	if err := controllerutil.SetOwnerReference(policy, svm, d.Client.Scheme()); err != nil {
		return fmt.Errorf("own StorageVersionMigration %s: %w", ref.Name, err)
	}
	if err := d.Client.Create(ctx, svm); err != nil {
		return fmt.Errorf("create StorageVersionMigration %s for %s: %w", ref.Name, crd.Name, err)
	}
	ref.UID, ref.Phase, ref.Created = svm.UID, string(storagemigration.Running), ref.Created+1
	mr.Progress = string(storagemigration.Running)
	log.FromContext(ctx).Info("created the in-tree StorageVersionMigration", "storageVersionMigration", klog.KObj(svm),
		"created", ref.Created)
	return nil
}

// inTreeSucceeded reports a run whose in-tree migration succeeded: what is
// left is Graduator's check of it (migrate, from the run's checkpoint).
func inTreeSucceeded(policy *graduatorv1alpha1.CRDVersionPolicy, step graduation.Step) bool {
	mr := policy.Status.Migration
	return !step.Restart && mr != nil && mr.StorageVersionMigration != nil &&
		mr.StorageVersionMigration.Phase == string(storagemigration.Succeeded)
}
