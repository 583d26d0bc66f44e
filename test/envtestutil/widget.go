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

// Package envtestutil holds what Graduator's envtest suites and benchmark
// share: the control plane with its clients (Start), the "widget" CRD and its
// objects, waiting for a CRD to be served or deleted, a recorder of the LIST
// requests a client sends, and a reader of what the API server stored in
// etcd. It works in your own envtest suites too; the Ginkgo side of a suite's
// bootstrap is in envtestutil/envsuite.
package envtestutil

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/graduationtest"
)

// WidgetCRD returns "widgets.<group>", a small namespaced CRD (kind Widget)
// whose versions are all served and share one schema (spec.color, spec.size,
// spec.notes), so it needs no conversion webhook. The first version is the
// storage version.
func WidgetCRD(group string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
		},
	}
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v, Served: true, Storage: i == 0,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"color": {Type: "string"},
						"size":  {Type: "integer"},
						"notes": {Type: "string"},
					}},
				},
			}},
		})
	}
	return crd
}

// WithStatusSubresource gives every version of crd the /status subresource
// and a free-form status, and returns crd.
func WithStatusSubresource(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
		v.Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: &preserve,
		}
	}
	return crd
}

// WidgetResource is the widgets of group at version.
func WidgetResource(group, version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: "widgets"}
}

// Widget returns a widget to create at the version of gvr.
func Widget(gvr schema.GroupVersionResource, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "Widget",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

// CreateObjects creates n objects of gvr, object(i) for i in [0, n), each in
// its own namespace, with the given number of concurrent writers (see
// ForEach). It returns the first error; the writer that hit it stops.
func CreateObjects(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, n, writers int,
	object func(i int) *unstructured.Unstructured) error {
	return ForEach(n, writers, func(i int) error {
		obj := object(i)
		if _, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create %s %s/%s: %w", gvr.Resource, obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	})
}

// ForEach calls do(i) for i in [0, n) on the given number of goroutines
// (goroutine w takes i = w, w+workers, ...; one goroutine goes in order). It
// returns the first error; the goroutine that hit it stops.
func ForEach(n, workers int, do func(i int) error) error {
	workers = max(workers, 1)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Served returns nil once every served version of crd answers a LIST:
// graduationtest.Served.
func Served(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	return graduationtest.Served(ctx, dyn, crd)
}

// WaitServed waits, up to 30 s, until the CRD named name is established and
// every served version answers a LIST: graduationtest.WaitServed.
func WaitServed(ctx context.Context, c client.Client, dyn dynamic.Interface, name string) error {
	return graduationtest.WaitServed(ctx, c, dyn, name, 30*time.Second)
}

// DeleteCRD deletes the CRD named name, and so its objects, and waits up to
// timeout until it is gone.
func DeleteCRD(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := client.IgnoreNotFound(c.Delete(ctx, crd)); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s is not deleted: %w", name, err)
	}
	return nil
}

// SetStorageVersion makes version the storage version of the CRD named
// crdName, retrying on conflicts. The API server takes a moment to write new
// objects in it.
func SetStorageVersion(ctx context.Context, c client.Client, crdName, version string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
			return err
		}
		found := false
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
			found = found || crd.Spec.Versions[i].Storage
		}
		if !found {
			return fmt.Errorf("CRD %s has no version %s", crdName, version)
		}
		return c.Update(ctx, &crd)
	})
}
