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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions returns the manager's cache settings: CRDs are cached without
// what makes them big (schemas, managedFields, the last-applied annotation
// that repeats the whole manifest), so the operator's memory does not grow
// with the size of the CRDs in the cluster. What the cache keeps is what the
// drift reporter and the event handlers read: names, versions and their
// flags, storedVersions. The reconciler reads whole CRDs from the API server.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&apiextensionsv1.CustomResourceDefinition{}: {Transform: stripCRD},
	}}
}

// lastApplied is kubectl's annotation holding the whole applied manifest.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func stripCRD(obj any) (any, error) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return obj, nil
	}
	crd.ManagedFields = nil
	delete(crd.Annotations, lastApplied)
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = nil
		crd.Spec.Versions[i].AdditionalPrinterColumns = nil
	}
	return crd, nil
}
