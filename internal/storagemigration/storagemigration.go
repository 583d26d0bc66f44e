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

// Package storagemigration reads Kubernetes' in-tree storage version
// migrations (storagemigration.k8s.io/v1 StorageVersionMigration, GA in 1.37,
// run by kube-controller-manager) as they concern one CRD, so that Graduator
// never migrates a resource the in-tree migrator is migrating.
//
// Facts it rests on (Kubernetes 1.37 source, pkg/controller/storageversionmigrator):
// the in-tree migrator takes a StorageVersionMigration that has neither a
// Succeeded nor a Failed condition as one to run; while it migrates a CRD's
// resource it sets the CRD's StorageMigrating condition to True with the CRD's
// generation, and after a successful run it prunes status.storedVersions only
// when that condition still carries the CRD's current generation. A Failed
// migration stays Failed: nothing retries it.
package storagemigration

import (
	"errors"
	"fmt"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// MinRelease is the first Kubernetes release that serves
// storagemigration.k8s.io/v1, the API engine StorageVersionMigration uses:
// 1.30 to 1.34 serve v1alpha1 at most, 1.35 and 1.36 v1beta1, both off
// unless the cluster enables them.
const MinRelease = "1.37"

// UnservedError says that the API server does not serve
// storagemigration.k8s.io/v1 StorageVersionMigrations, so engine
// StorageVersionMigration cannot run on it. Nothing was created or written.
type UnservedError struct {
	// ServerVersion is the release the API server reports (v1.30.14); empty
	// when it was not asked or did not answer.
	ServerVersion string
}

func (e *UnservedError) Error() string {
	server := "the API server"
	if e.ServerVersion != "" {
		server += " (Kubernetes " + e.ServerVersion + ")"
	}
	return fmt.Sprintf("%s does not serve %s StorageVersionMigrations: engine StorageVersionMigration needs Kubernetes %s "+
		"or newer; use engine Graduator on this cluster", server, svmv1.SchemeGroupVersion, MinRelease)
}

// Served asks discovery whether the API server serves StorageVersionMigrations
// at storagemigration.k8s.io/v1: nil when it does, an *UnservedError naming
// the server's release and the one engine StorageVersionMigration needs when
// it does not, and a failed discovery as it is.
func Served(disco discovery.DiscoveryInterface) error {
	resources, err := disco.ServerResourcesForGroupVersion(svmv1.SchemeGroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("discover %s: %w", svmv1.SchemeGroupVersion, err)
	default:
		for _, r := range resources.APIResources {
			if r.Name == "storageversionmigrations" {
				return nil
			}
		}
	}
	unserved := &UnservedError{}
	if v, err := disco.ServerVersion(); err == nil {
		unserved.ServerVersion = v.GitVersion
	}
	return unserved
}

// Unserved returns the *UnservedError err is, or the one it stands for when
// err is a client's "no matches for kind" for storagemigration.k8s.io (a
// StorageVersionMigration read on a server that does not serve them); nil
// for any other error.
func Unserved(err error) *UnservedError {
	if unserved, ok := errors.AsType[*UnservedError](err); ok {
		return unserved
	}
	var noKind *meta.NoKindMatchError
	if errors.As(err, &noKind) && noKind.GroupKind.Group == svmv1.GroupName {
		return &UnservedError{}
	}
	var noResource *meta.NoResourceMatchError
	if errors.As(err, &noResource) && noResource.PartialResource.Group == svmv1.GroupName {
		return &UnservedError{}
	}
	return nil
}

// ResourceOf returns the group resource an in-tree migration of the CRD names.
func ResourceOf(crd *apiextensionsv1.CustomResourceDefinition) metav1.GroupResource {
	return metav1.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
}

// Phase is where an in-tree migration stands.
type Phase string

const (
	// Running: neither Succeeded nor Failed yet (queued or migrating).
	Running Phase = "Running"
	// Succeeded: every object was migrated.
	Succeeded Phase = "Succeeded"
	// Failed: the run stopped for good; only a new object runs it again.
	Failed Phase = "Failed"
)

// PhaseOf returns the phase of one migration from its conditions.
func PhaseOf(svm *svmv1.StorageVersionMigration) Phase {
	switch {
	case meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded)):
		return Succeeded
	case meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed)):
		return Failed
	default:
		return Running
	}
}

// RunningFor returns the migrations of the CRD's resource that are running,
// oldest first as listed.
func RunningFor(crd *apiextensionsv1.CustomResourceDefinition, svms []svmv1.StorageVersionMigration) []*svmv1.StorageVersionMigration {
	resource := ResourceOf(crd)
	var running []*svmv1.StorageVersionMigration
	for i := range svms {
		if svms[i].Spec.Resource == resource && PhaseOf(&svms[i]) == Running {
			running = append(running, &svms[i])
		}
	}
	return running
}

// CRDMigrating reports whether the CRD says an in-tree migration of its
// current generation runs: StorageMigrating=True observed at its generation.
func CRDMigrating(crd *apiextensionsv1.CustomResourceDefinition) bool {
	c := apihelpers.FindCRDCondition(crd, apiextensionsv1.StorageMigrating)
	return c != nil && c.Status == apiextensionsv1.ConditionTrue && c.ObservedGeneration == crd.Generation
}

// Message says, for a condition, which in-tree migration Graduator waits for.
func Message(crd *apiextensionsv1.CustomResourceDefinition, running []*svmv1.StorageVersionMigration) string {
	if len(running) > 0 {
		resource := ResourceOf(crd)
		return "an in-tree StorageVersionMigration (" + running[0].Name + ") is migrating " + resource.String() +
			"; Graduator starts no run of its own beside it and goes on when it has finished"
	}
	return "the CRD's StorageMigrating condition says an in-tree storage migration runs; Graduator starts no run " +
		"of its own beside it and goes on when it has finished"
}

// NamePrefix starts the name of every StorageVersionMigration Graduator
// creates (engine StorageVersionMigration).
const NamePrefix = "graduator-"

// ManagedByLabel marks the StorageVersionMigrations Graduator creates, so
// that they can be found (kubectl get storageversionmigrations -l ...).
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedBy is ManagedByLabel's value.
const ManagedBy = "graduator"

// NameFor returns the name of the StorageVersionMigration Graduator creates
// for a CRD: one per CRD, found again by name after a restart. A CRD name is
// at most 253 characters; the prefix is dropped rather than the name cut,
// so that two CRDs never share one.
func NameFor(crdName string) string {
	if len(NamePrefix)+len(crdName) > 253 {
		return crdName
	}
	return NamePrefix + crdName
}

// FailedMessage returns the reason and message of a Failed migration's
// condition.
func FailedMessage(svm *svmv1.StorageVersionMigration) (reason, message string) {
	if c := meta.FindStatusCondition(svm.Status.Conditions, string(svmv1.MigrationFailed)); c != nil {
		return c.Reason, c.Message
	}
	return "", ""
}

// FailedError is an in-tree migration that ended Failed: the in-tree
// migrator never retries it, so Graduator deletes it and creates it again
// after the backoff of a stalled step.
type FailedError struct {
	// Name of the StorageVersionMigration.
	Name string
	// Reason and Message are its Failed condition's.
	Reason, Message string
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("the in-tree StorageVersionMigration %s failed (%s): %s; it was deleted and is created again",
		e.Name, e.Reason, e.Message)
}
