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

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Create creates objects, each at the version of its apiVersion (typed
// objects need their types in Options.Scheme), so that the API server
// stores them in the CRD's storage version of the moment. It fails the test
// on the first error.
func (r *Rehearsal) Create(ctx context.Context, objs ...client.Object) {
	r.helper()
	r.fatal(r.TryCreate(ctx, objs...))
}

// TryCreate is Create returning the first error.
func (r *Rehearsal) TryCreate(ctx context.Context, objs ...client.Object) error {
	for _, obj := range objs {
		if err := r.Client.Create(ctx, obj); err != nil {
			gvk, _ := r.Client.GroupVersionKindFor(obj)
			return fmt.Errorf("create %s %s: %w", gvk.Kind+"."+gvk.GroupVersion().String(), client.ObjectKeyFromObject(obj), err)
		}
	}
	return nil
}
