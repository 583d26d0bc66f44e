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

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// The rules below are the ones more than one caller enforces: Plan, the
// graduator CLI and `graduator check`. Each caller words its own message
// (a condition, a flag error, a finding); the rule itself lives here once.

// StatusSubresourceMissing reports whether writes to writeTo cannot reach
// the objects of version: writeTo is Status and the version has no status
// subresource, so every write would answer 404 and no object would be
// rewritten. A version the CRD does not have is not this rule's concern.
func StatusSubresourceMissing(crd *apiextensionsv1.CustomResourceDefinition, version string, writeTo graduatorv1alpha1.WriteTarget) bool {
	if writeTo != graduatorv1alpha1.WriteToStatus {
		return false
	}
	v := crdVersion(crd, version)
	return v != nil && (v.Subresources == nil || v.Subresources.Status == nil)
}

// ConversionMissing reports whether objects stored as one version would be
// served as the other unconverted, dropping fields: their schemas differ and
// the CRD has no conversion webhook. Either version nil: false.
func ConversionMissing(crd *apiextensionsv1.CustomResourceDefinition, a, b *apiextensionsv1.CustomResourceDefinitionVersion) bool {
	if a == nil || b == nil {
		return false
	}
	if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return false
	}
	return !equality.Semantic.DeepEqual(a.Schema, b.Schema)
}
