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

package roundtrip

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/migration"
)

// pair is an object read at its old version (a) and the same object after
// the round trip old -> storage -> old (b).
type pair struct {
	a, b *unstructured.Unstructured
}

// source turns objects read at their old version into pairs. An object
// deleted meanwhile has no pair. An error (a webhook down, a refused write)
// is not a loss: it says nothing about the conversion.
type source interface {
	roundTrip(ctx context.Context, objs []*unstructured.Unstructured) ([]pair, error)
}

// dryRun is the source once the storage version is the target: a dryRun=All
// no-op write of each object at its old version. The API server decodes the
// stored object, applies the patch, encodes it to the storage version
// (converting, pruning by the storage version's schema) and decodes it
// back, then answers at the old version: the round trip the migration's
// own write will make, without storing anything.
type dryRun struct {
	objects     dynamic.NamespaceableResourceInterface
	writeTo     migration.WriteTarget
	concurrency int
}

// conflictRetries bounds the fresh reads of an object that keeps changing
// under the dry run.
const conflictRetries = 3

func (d dryRun) roundTrip(ctx context.Context, objs []*unstructured.Unstructured) ([]pair, error) {
	pairs := make([]*pair, len(objs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, d.concurrency))
	for i := range objs {
		if gctx.Err() != nil {
			break // a dry run failed: the others take no more work
		}
		g.Go(func() error {
			p, err := d.one(gctx, objs[i])
			pairs[i] = p
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]pair, 0, len(objs))
	for _, p := range pairs {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out, nil
}

// one dry-runs the migration's write of a; an object changed since it was
// read is read again (the changed object is the one to prove), a deleted
// one has no pair.
func (d dryRun) one(ctx context.Context, a *unstructured.Unstructured) (*pair, error) {
	objects := d.objects.Namespace(a.GetNamespace())
	for attempt := 0; ; attempt++ {
		patch := migration.NoOpPatch(migration.ObjectVersion{UID: string(a.GetUID()), ResourceVersion: a.GetResourceVersion()})
		b, err := objects.Patch(ctx, a.GetName(), types.MergePatchType, patch,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, d.writeTo.Subresources()...)
		if err == nil {
			return &pair{a: a, b: b}, nil
		}
		if refusedByAdmission(err) {
			// Validation or an admission policy refuses the write: the
			// migration cannot rewrite this object either (it names it as
			// failed), so its content cannot be lost by a rewrite.
			return nil, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) || attempt == conflictRetries {
			return nil, fmt.Errorf("dry-run the no-op write of %s: %w", objectName(a), err)
		}
		fresh, getErr := objects.Get(ctx, a.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(getErr):
			return nil, nil
		case getErr != nil:
			return nil, fmt.Errorf("read %s again: %w", objectName(a), getErr)
		case fresh.GetUID() == a.GetUID() && fresh.GetResourceVersion() == a.GetResourceVersion():
			// Not found, yet there as read: the /status subresource the
			// write goes to is missing, which the preflight reports.
			return nil, fmt.Errorf("dry-run the no-op write of %s: %w", objectName(a), err)
		}
		a = fresh
	}
}

func objectName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// refusedByAdmission reports a write refused for the object's own sake
// (validation, an admission webhook or policy), not for its conversion.
func refusedByAdmission(err error) bool {
	return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && !errclass.IsConversionError(err)
}
