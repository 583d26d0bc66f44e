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

package graduation

// What the plan reads of a CRD, and small helpers over it.

import (
	"slices"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// Observe records in the policy's status what the CRD looks like now, keeping
// the timestamps the plan counts from: since when the storage version is the
// current one, and since when each version is deprecated. The status is
// changed in place.
func Observe(crd *apiextensionsv1.CustomResourceDefinition, status *graduatorv1alpha1.CRDVersionPolicyStatus, now time.Time) {
	if crd == nil {
		return
	}
	stamp := metav1.NewTime(now)
	if sv := StorageVersion(crd); sv != status.StorageVersion || status.StorageVersionSince == nil {
		status.StorageVersion = sv
		status.StorageVersionSince = &stamp
	}
	status.StoredVersions = slices.Clone(crd.Status.StoredVersions)

	previous := status.Versions
	var versions []graduatorv1alpha1.VersionStatus
	for _, v := range crd.Spec.Versions {
		vs := graduatorv1alpha1.VersionStatus{Name: v.Name, Served: v.Served, Storage: v.Storage, Deprecated: v.Deprecated}
		for _, old := range previous {
			if old.Name != v.Name {
				continue
			}
			if v.Deprecated && old.DeprecatedSince != nil {
				vs.DeprecatedSince = old.DeprecatedSince
			}
			vs.ManagedFieldsCleaned = old.ManagedFieldsCleaned && !v.Served
		}
		if v.Deprecated && vs.DeprecatedSince == nil {
			vs.DeprecatedSince = &stamp
		}
		versions = append(versions, vs)
	}
	// Versions removed from the CRD stay listed, so a policy naming them is
	// known to be about a retired version rather than a typo.
	for _, old := range previous {
		if crdVersion(crd, old.Name) == nil {
			old.Served, old.Storage = false, false
			versions = append(versions, old)
		}
	}
	status.Versions = versions
}

// StorageVersion returns the name of the CRD's storage version, or "".
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	v, _ := apihelpers.GetCRDStorageVersion(crd) // none: ""
	return v
}

// ResourceAt is the resource of the CRD's objects at version, as clients
// address it.
func ResourceAt(crd *apiextensionsv1.CustomResourceDefinition, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
}

// StaleStoredVersions returns the versions in status.storedVersions that are
// not the storage version: the drift the operator reports for CRDs without a
// policy.
func StaleStoredVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	storage := StorageVersion(crd)
	var stale []string
	for _, v := range crd.Status.StoredVersions {
		if v != storage {
			stale = append(stale, v)
		}
	}
	return stale
}

func crdVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

func versionNames(crd *apiextensionsv1.CustomResourceDefinition) []string {
	names := make([]string, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	return names
}

func listedVersions(spec graduatorv1alpha1.CRDVersionPolicySpec) []string {
	var names []string
	for _, d := range spec.Deprecate {
		names = append(names, d.Version)
	}
	for _, u := range spec.Unserve {
		if !slices.Contains(names, u.Version) {
			names = append(names, u.Version)
		}
	}
	return names
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
