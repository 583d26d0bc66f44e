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

// Package steps holds the steps of a graduation that do not depend on who
// asked for it: the preflight, the access check and the wait for the
// storage switch to settle. The operator's policy reconciler and the
// crdmigrate controller call the same functions, so a CRD is checked the
// same way whichever of them graduates it; the migration and the prune are
// the migration package's Run and PruneStoredVersions, called by both.
package steps

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graduator/graduator/access"
	"github.com/graduator/graduator/errclass"
	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/migration"
)

// PreflightSample is how many existing objects the preflight reads and
// dry-run writes at the target version.
const PreflightSample = 5

// Preflight reasons (besides graduation.ReasonConversionFailed).
const (
	ReasonReadFailed    = "ReadFailed"
	ReasonWriteRejected = "WriteRejected"
)

// Preflight reads a sample of objects at the target version, which makes
// the API server convert them (exercising the conversion webhook), and
// writes them back as a dry run, which exercises validation and admission,
// before anything is changed. The dry run takes the path the migration will
// take: the same subresource, the same patch and preconditions.
func Preflight(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, target string,
	writeTo migration.WriteTarget) graduation.PreflightResult {
	gvr := graduation.ResourceAt(crd, target)
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: PreflightSample})
	if err != nil {
		reason := ReasonReadFailed
		if errclass.IsConversionError(err) {
			reason = graduation.ReasonConversionFailed
		}
		return graduation.PreflightResult{Reason: reason, Message: fmt.Sprintf("reading %s at %s: %v", crd.Spec.Names.Plural, target, err)}
	}
	for _, obj := range list.Items {
		patch := migration.NoOpPatch(migration.ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()})
		_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, writeTo.Subresources()...)
		if err == nil || apierrors.IsConflict(err) {
			continue
		}
		if apierrors.IsNotFound(err) {
			// Deleted since the LIST, or a subresource that is not there:
			// only a read tells them apart.
			if _, getErr := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(getErr) {
				continue
			}
		}
		reason := ReasonWriteRejected
		if errclass.IsConversionError(err) {
			reason = graduation.ReasonConversionFailed
		}
		return graduation.PreflightResult{Reason: reason, Message: fmt.Sprintf("a no-op write of %s at %s was refused: %v",
			klog.KObj(&obj), target, err)}
	}
	return graduation.PreflightResult{Passed: true}
}

// MayMigrate asks the API server whether the caller may list, read and
// patch the CRD's objects at version (and their /status for writeTo:
// Status). A denial is an *access.Denied, which names the RBAC rule to add,
// before anything is switched or written.
func MayMigrate(ctx context.Context, reviews authorizationv1client.SelfSubjectAccessReviewInterface,
	crd *apiextensionsv1.CustomResourceDefinition, version string, writeTo migration.WriteTarget) error {
	if err := access.Check(ctx, reviews, graduation.ResourceAt(crd, version), writeTo); err != nil {
		// The error names the resource already; a condition message keeps
		// 600 characters, which a long group name repeated would exceed.
		return fmt.Errorf("check access: %w", err)
	}
	return nil
}

// StorageSettled reports whether API discovery advertises the CRD's current
// storage version. Discovery can show the new hash while the server still
// writes the old version (kubernetes #130235), which is why callers also
// wait a settle delay.
func StorageSettled(ctx context.Context, disco discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if crd == nil {
		return false, nil
	}
	storage := graduation.StorageVersion(crd)
	if len(crd.Status.StoredVersions) == 1 && crd.Status.StoredVersions[0] == storage {
		return true, nil // nothing to migrate; discovery does not matter
	}
	resources, err := disco.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + storage)
	switch {
	case apierrors.IsNotFound(err):
		// Not served yet: the API server has not caught up with the CRD.
		log.FromContext(ctx).V(1).Info("discovery does not serve the storage version yet", "version", storage)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s/%s: %w", crd.Spec.Group, storage, err)
	}
	want := apidiscovery.StorageVersionHash(crd.Spec.Group, storage, crd.Spec.Names.Kind)
	for _, res := range resources.APIResources {
		if res.Name == crd.Spec.Names.Plural {
			return res.StorageVersionHash == want, nil
		}
	}
	return false, nil
}
