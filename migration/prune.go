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

package migration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clientretry "k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/internal/enginehook"
	"github.com/graduator/graduator/internal/paging"
	"github.com/graduator/graduator/internal/space"
)

// ErrCRDChanged says the CRD's storage version or generation is not the one
// the migration ran on: objects written since may be stored in another
// version. PruneStoredVersions returns it rather than lose track of them,
// and a door interrupts a running migration with it.
var ErrCRDChanged = errors.New("the CRD changed since the migration started")

// ErrIncompleteRun is returned by PruneStoredVersions when the migration
// did not reach the end of the listing or could not rewrite some objects:
// those may still be stored in an old version.
var ErrIncompleteRun = errors.New("the migration did not rewrite every object")

// Expectation is the migration run a pruning relies on.
type Expectation struct {
	// StorageVersion the objects were rewritten in.
	StorageVersion string
	// Generation of the CRD when the run started.
	Generation int64
	// Complete says the run reached the end of the listing (Result.Complete).
	Complete bool
	// Failed is the number of objects the run could not rewrite.
	Failed int64
}

// PruneStoredVersions sets status.storedVersions of the CRD to its storage
// version. It refuses with ErrIncompleteRun after a partial or failed run,
// and with ErrCRDChanged when the CRD no longer matches expect; it writes with
// an optimistic lock on the CRD's resourceVersion, so a concurrent change
// makes it fail rather than prune on stale knowledge. It does not ask the
// API servers of an HA control plane whether each one writes the storage
// version: Graduator's operator, crdmigrate and CLI do that before they call
// it, and a caller of Run that switched the storage version itself must make
// sure of it too (an API server that learned the switch late may have stored
// some of the run's own writes in the old version).
func PruneStoredVersions(ctx context.Context, c client.Client, crdName string, expect Expectation) error {
	if !expect.Complete || expect.Failed > 0 {
		return fmt.Errorf("%w: refusing to prune status.storedVersions of %s (complete: %t, failed: %d)",
			ErrIncompleteRun, crdName, expect.Complete, expect.Failed)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
		return fmt.Errorf("get CRD %s: %w", crdName, err)
	}
	storage, _ := apihelpers.GetCRDStorageVersion(&crd) // none: "", which differs from any expectation
	if storage != expect.StorageVersion || crd.Generation != expect.Generation {
		return fmt.Errorf("%w: %s now stores %s at generation %d, the migration ran for %s at generation %d",
			ErrCRDChanged, crdName, storage, crd.Generation, expect.StorageVersion, expect.Generation)
	}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return nil
	}
	pruned := crd.DeepCopy()
	pruned.Status.StoredVersions = []string{storage}
	if err := c.Status().Patch(ctx, pruned, client.MergeFromWithOptions(&crd, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("%w: %s was written while pruning: %v", ErrCRDChanged, crdName, err)
		}
		return fmt.Errorf("prune status.storedVersions of %s: %w", crdName, err)
	}
	return nil
}

// CleanupManagedFields removes, from every object of resource, the
// metadata.managedFields entries whose apiVersion is not one of the served
// versions: they break later server-side applies ("request to convert CR to
// an invalid group/version"). It returns how many objects it changed. Its
// patches are budgeted as CleanupManagedFieldsWithin's with no options: the
// database's size unknown, a fixed 16 MiB per compaction.
func CleanupManagedFields(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource, served []string) (int, error) {
	res, err := CleanupManagedFieldsWithin(ctx, c, resource, served, CleanupOptions{})
	return res.Cleaned, err
}

// CleanupOptions are the etcd space budget's inputs for the managedFields
// cleanup, as Options' for a Run: the cleanup rewrites as many objects as
// the migration, so it writes under the same rule (internal/space).
type CleanupOptions struct {
	// Config reads the API server's /metrics for etcd's database size.
	Config *rest.Config
	// EtcdQuota and Previous are Options'.
	EtcdQuota int64
	Previous  SpaceLedger
	// OnCompactionWait is called when the cleanup starts waiting for etcd's
	// next compaction, with why, and with "" when the wait ends.
	OnCompactionWait func(string)
}

// CleanupResult is what a cleanup did.
type CleanupResult struct {
	// Cleaned is the number of objects whose entries were dropped.
	Cleaned int
	// SpaceBudget and SpaceBudgetReason are its etcd space budget (-1:
	// off) and how it was set; CompactionWaits the compactions it waited
	// for.
	SpaceBudget       int64
	SpaceBudgetReason string
	CompactionWaits   int
	// Space is what its writes did to etcd's space, for what follows.
	Space SpaceLedger
}

// CleanupManagedFieldsWithin is CleanupManagedFields with its etcd space
// budget told: each patch is charged to it (as the cleanup's) at the object's
// size, and the cleanup waits for a compaction when the patches not
// compacted yet would pass it.
//
// It lists with paging.EachObject, paging.DefaultPageSize objects at a time;
// a listing whose continue token expired goes on, or starts again, as
// paging.Pager says: objects already cleaned then have nothing left to drop
// and are not counted twice.
func CleanupManagedFieldsWithin(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource, served []string, opts CleanupOptions) (CleanupResult, error) {
	servedAPIVersions := map[string]bool{}
	for _, v := range served {
		servedAPIVersions[schema.GroupVersion{Group: resource.Group, Version: v}.String()] = true
	}
	objects := dynamicObjects{client: c, resource: resource}
	hook := enginehook.From(ctx)
	inputs := space.Inputs{Quota: opts.EtcdQuota, Previous: space.Ledger(opts.Previous), Metrics: metricsReader(opts.Config), Fixed: hook.SpaceBudget,
		Pool: spacePool(opts.Config)}
	var res CleanupResult
	var budget *space.Budget
	budget, res.SpaceBudgetReason, _ = inputs.New(ctx, objects.compacted, resource.String())
	res.SpaceBudget = budget.Current()
	budget.OnRebudget(func(reason string) {
		res.SpaceBudget, res.SpaceBudgetReason = budget.Current(), reason
	})
	w := &cleanupWriter{space: budget, served: servedAPIVersions, onWait: opts.OnCompactionWait, waits: &res.CompactionWaits}
	err := paging.EachObject(ctx, c, resource, paging.DefaultPageSize, nil, func(obj *unstructured.Unstructured) error {
		changed, err := w.cleanup(ctx, c, resource, obj)
		if changed {
			res.Cleaned++
		}
		return err
	})
	budget.Settle(ctx)
	res.Space = SpaceLedger(budget.Ledger())
	budget.Leave(ctx)
	if !budget.Off() && hook.OnCharged != nil {
		hook.OnCharged(budget.Charges())
	}
	return res, err
}

// cleanupWriter patches objects under the cleanup's budget.
type cleanupWriter struct {
	space  *space.Budget
	served map[string]bool
	onWait func(string)
	waits  *int
}

// reserve charges one patch of an object of size bytes, waiting for a
// compaction when the budget is spent.
func (w *cleanupWriter) reserve(ctx context.Context, size int64) (*space.Chunk, error) {
	w.space.SampledPage(size)
	return w.space.Reserve(ctx, space.WriterCleanup, func(rev string) {
		*w.waits++
		if w.onWait != nil {
			w.onWait(fmt.Sprintf("waiting for etcd's next compaction past resourceVersion %s: the managedFields cleanup's writes not compacted yet reached its budget of %s",
				rev, space.BytesText(w.space.Current())))
		}
	}, func() {
		if w.onWait != nil {
			w.onWait("")
		}
	})
}

// cleanupObject drops the stale entries of one object. The patch carries the
// object's resourceVersion, so a concurrent write makes it conflict: the
// object is then read again and the entries recomputed (retry.DefaultRetry).
// An object deleted meanwhile needs no cleaning.
func (w *cleanupWriter) cleanup(ctx context.Context, c dynamic.Interface, resource schema.GroupVersionResource,
	obj *unstructured.Unstructured) (bool, error) {
	served := w.served
	ref := klog.KRef(obj.GetNamespace(), obj.GetName())
	objects := c.Resource(resource).Namespace(obj.GetNamespace())
	current := obj
	changed := false
	failed := "" // the operation whose error RetryOnConflict returns
	err := clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		if current == nil {
			// The last patch conflicted: read what is stored now.
			got, err := objects.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				failed = "get"
				return err
			}
			current = got
		}
		var kept []metav1.ManagedFieldsEntry
		for _, entry := range current.GetManagedFields() {
			if served[entry.APIVersion] {
				kept = append(kept, entry)
			}
		}
		if len(kept) == len(current.GetManagedFields()) {
			changed = false
			return nil
		}
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": current.GetResourceVersion(),
			"managedFields":   managedFieldsJSON(kept),
		}})
		if err != nil {
			failed = "encode the managedFields patch of"
			return err
		}
		size, _ := sizeOf(current, nil)
		chunk, err := w.reserve(ctx, size)
		if err != nil {
			failed = "wait for etcd's space budget to clean managedFields of"
			return err
		}
		patched, err := objects.Patch(ctx, obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{})
		rv := ""
		if err == nil {
			rv = patched.GetResourceVersion()
		}
		w.space.Done(chunk, rv)
		if err != nil {
			failed = "clean managedFields of"
			if apierrors.IsConflict(err) {
				current = nil
			}
			return err
		}
		changed = true
		return nil
	})
	switch {
	case err == nil:
		return changed, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("%s %s %s: %w", failed, resource.Resource, ref, err)
	}
}

// managedFieldsJSON returns the entries as JSON values. The API server
// ignores an empty list (so that clients unaware of managedFields never strip
// them); a list of one empty entry is how to drop them all.
func managedFieldsJSON(entries []metav1.ManagedFieldsEntry) []any {
	if len(entries) == 0 {
		return []any{map[string]any{}}
	}
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		out = append(out, e)
	}
	return out
}
