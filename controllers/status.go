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
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
)

// statusWriter is the policy's patch helper: Reconcile changes the status
// in memory and writes it once when it returns (a deferred write), and a
// running migration writes its progress after each page. It writes only
// what changed since the last write, and nothing when nothing did.
type statusWriter struct {
	client  client.Client
	policy  *graduatorv1alpha1.CRDVersionPolicy
	written *graduatorv1alpha1.CRDVersionPolicy
}

func newStatusWriter(c client.Client, policy *graduatorv1alpha1.CRDVersionPolicy) *statusWriter {
	return &statusWriter{client: c, policy: policy, written: policy.DeepCopy()}
}

// write patches the status subresource with what changed. The operator is the
// only writer of the status (leader election), so a merge patch without a
// resourceVersion lock is safe, and spec edits made meanwhile never make it
// fail.
func (w *statusWriter) write(ctx context.Context) error {
	if equality.Semantic.DeepEqual(w.written.Status, w.policy.Status) {
		return nil
	}
	// Patch a copy: the response must not replace the structs the
	// reconciler holds pointers into (the running migration's status).
	patched := w.written.DeepCopy()
	w.policy.Status.DeepCopyInto(&patched.Status)
	if err := w.client.Status().Patch(ctx, patched, client.MergeFrom(w.written)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: no status left to write
		}
		return fmt.Errorf("write status of policy %s: %w", w.policy.Name, err)
	}
	w.written = patched
	observePolicy(patched)
	return nil
}
