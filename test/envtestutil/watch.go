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

package envtestutil

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// CRDResource is apiextensions.k8s.io/v1's customresourcedefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// WatchNamed calls see with every state of the cluster-scoped object named
// name that a LIST and a WATCH from it show, again from a new LIST whenever
// the watch ends (the API server restarts, say), until ctx ends. A state
// that lasted less than a relist may be missed; every state a watch
// delivers is seen, in order.
func WatchNamed(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string,
	see func(*unstructured.Unstructured)) {
	selector := "metadata.name=" + name
	for ctx.Err() == nil {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err == nil {
			for i := range list.Items {
				see(&list.Items[i])
			}
			w, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.GetResourceVersion()})
			if err == nil {
				for ev := range w.ResultChan() {
					if obj, ok := ev.Object.(*unstructured.Unstructured); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
						see(obj)
					}
				}
				w.Stop()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
