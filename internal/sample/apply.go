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

package sample

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The way a GitOps tool configured for Graduator's managed mode applies a
// CRD manifest (Argo CD with ignoreDifferences on the version flags and
// RespectIgnoreDifferences=true): the manifest wins, except for the flags
// the operator owns on versions that already exist.

// KeepOperatorFlags returns the manifest with served, storage, deprecated and
// deprecationWarning of every version that the live CRD also has taken from
// the live CRD. Versions new in the manifest keep the manifest's flags.
func KeepOperatorFlags(live, manifest *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := manifest.DeepCopy()
	liveVersions := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
	for _, v := range live.Spec.Versions {
		liveVersions[v.Name] = v
	}
	liveStorage := ""
	for _, v := range live.Spec.Versions {
		if v.Storage {
			liveStorage = v.Name
		}
	}
	for i := range out.Spec.Versions {
		v := &out.Spec.Versions[i]
		if lv, ok := liveVersions[v.Name]; ok {
			v.Served, v.Deprecated, v.DeprecationWarning = lv.Served, lv.Deprecated, lv.DeprecationWarning
		}
		// Exactly one version stores: the live one, if the manifest still
		// has it.
		if _, ok := liveVersions[liveStorage]; ok && hasVersion(out, liveStorage) {
			v.Storage = v.Name == liveStorage
		}
	}
	return out
}

// ApplyCRD creates the CRD from the manifest, or updates the live one with
// KeepOperatorFlags. Status is never written.
func ApplyCRD(ctx context.Context, c client.Client, manifest *apiextensionsv1.CustomResourceDefinition) error {
	var live apiextensionsv1.CustomResourceDefinition
	err := c.Get(ctx, client.ObjectKeyFromObject(manifest), &live)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get CRD %s: %w", manifest.Name, err)
	}
	if err != nil {
		if err := c.Create(ctx, manifest.DeepCopy()); err != nil {
			return fmt.Errorf("create CRD %s: %w", manifest.Name, err)
		}
		return nil
	}
	desired := KeepOperatorFlags(&live, manifest)
	desired.ResourceVersion = live.ResourceVersion
	desired.Status = live.Status
	if err := c.Update(ctx, desired); err != nil {
		return fmt.Errorf("update CRD %s: %w", manifest.Name, err)
	}
	return nil
}

func hasVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) bool {
	for _, v := range crd.Spec.Versions {
		if v.Name == name {
			return true
		}
	}
	return false
}
