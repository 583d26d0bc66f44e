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

package graduationtest

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Served returns nil once every served version of crd answers a LIST, the
// sign that the API server installed its handlers (Established alone comes
// earlier). Poll it, or use WaitServed.
func Served(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
		if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("list %s: %w", gvr, err)
		}
	}
	return nil
}

// WaitServed waits, up to timeout, until the CRD named name is established
// and every served version answers a LIST. Its error says what was last
// missing.
func WaitServed(ctx context.Context, c client.Client, dyn dynamic.Interface, name string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			last = err
			return false, client.IgnoreNotFound(err)
		}
		if !apihelpers.IsCRDConditionTrue(&crd, apiextensionsv1.Established) {
			last = fmt.Errorf("CRD %s is not established", name)
			return false, nil
		}
		last = Served(ctx, dyn, &crd)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("CRD %s is not served: %w: %w", name, err, last)
	}
	return err
}
