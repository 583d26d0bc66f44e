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

package driver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	apidiscovery "k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/internal/errclass"
	"github.com/graduator/graduator/internal/failpoint"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/roundtrip"
	"github.com/graduator/graduator/internal/storagemigration"
	"github.com/graduator/graduator/migration"
)

// step is how the driver carries out one action of graduation.Plan.
type step struct {
	// checkAccess asks the API server first whether the caller may migrate
	// the resource at all (mayMigrate): a denial names the rule to add
	// before anything is switched or written.
	checkAccess bool
	// check marks a step that changes nothing: its result is the next
	// plan's input, so it neither ends a stall nor rereads the spec.
	check bool
	// recovers, when set, says whether the step's success ends a stall;
	// always when nil.
	recovers func(g *run) bool
	perform  func(ctx context.Context, g *run, s graduation.Step) error
}

// steps is the graduation as the driver performs it: each action Plan can
// return and the function that performs it, in the order a CRD meets them.
func (d *Driver) steps() map[graduation.Action]step {
	return map[graduation.Action]step{
		graduation.ActionPreflight: {checkAccess: true, check: true, perform: func(ctx context.Context, g *run, s graduation.Step) error {
			g.preflight = d.preflight(ctx, g, s.StorageVersion)
			return nil
		}},
		graduation.ActionServe: {perform: func(ctx context.Context, g *run, s graduation.Step) error {
			return d.serve(ctx, g, s.StorageVersion)
		}},
		graduation.ActionSwitchStorage: {perform: func(ctx context.Context, g *run, s graduation.Step) error {
			return d.switchStorage(ctx, g, s.StorageVersion)
		}},
		graduation.ActionMigrate: {checkAccess: true, recovers: func(g *run) bool {
			// Creating an in-tree migration again is no sign that the cause
			// of the last failure is gone: the stall lasts until it Succeeds
			// (the plan keeps the attempts while it runs).
			return g.policy.Spec.Migration.Engine != graduatorv1alpha1.EngineStorageVersionMigration
		}, perform: func(ctx context.Context, g *run, s graduation.Step) error {
			if g.policy.Spec.Migration.Engine == graduatorv1alpha1.EngineStorageVersionMigration && !inTreeSucceeded(g.policy, s) {
				return d.driveInTree(ctx, g, s)
			}
			// Graduator's engine: the migration, or the check of an in-tree
			// one from its checkpoint.
			return d.migrate(ctx, g, s)
		}},
		graduation.ActionPrune: {perform: func(ctx context.Context, g *run, s graduation.Step) error {
			return d.prune(ctx, g, s.StorageVersion)
		}},
		graduation.ActionDeprecate: {perform: func(ctx context.Context, g *run, s graduation.Step) error {
			return d.deprecate(ctx, g, s.Versions)
		}},
		graduation.ActionUnserve: {perform: func(ctx context.Context, g *run, s graduation.Step) error {
			return d.unserve(ctx, g, s.Versions)
		}},
		graduation.ActionCleanupManagedFields: {perform: func(ctx context.Context, g *run, s graduation.Step) error {
			return d.cleanupManagedFields(ctx, g, s.Versions)
		}},
	}
}

// PreflightSample is how many existing objects the preflight reads and
// dry-run writes at the target version.
const PreflightSample = 5

// Preflight reasons (besides graduation.ReasonConversionFailed).
const (
	ReasonReadFailed    = "ReadFailed"
	ReasonWriteRejected = "WriteRejected"
)

// preflight runs Preflight, then proves that the conversion round-trips
// (proveRoundTrip); a failed one is also told in an Event, with the reason
// ConversionLossy for a lossy conversion.
func (d *Driver) preflight(ctx context.Context, g *run, target string) *graduation.PreflightResult {
	result := Preflight(ctx, d.Dynamic, g.crd, target, g.policy.Spec.Migration.WriteTo)
	if result.Passed {
		failpoint.Pause(ctx, failpoint.Proof)
		result = d.proveRoundTrip(ctx, g, target)
	}
	if !result.Passed {
		reason := graduation.ReasonPreflightFailed
		if result.Reason == graduation.ReasonConversionLossy {
			reason = graduation.ReasonConversionLossy
		}
		d.Reporter.Event(g.policy, g.crd, corev1.EventTypeWarning, reason, "Preflight", result.Message)
	}
	return &result
}

// proveRoundTrip proves, before the first write, that every old version
// objects are stored in survives old -> target -> old (package roundtrip):
// through the conversion webhook before the storage switch, through a dry
// run once the CRD stores target. What it proved, and the losses the policy
// accepts, go to status.roundTrip; a loss it does not accept fails the
// preflight with reason ConversionLossy.
func (d *Driver) proveRoundTrip(ctx context.Context, g *run, target string) graduation.PreflightResult {
	if len(graduation.StaleStoredVersions(g.crd)) == 0 && graduation.StorageVersion(g.crd) == target {
		return graduation.PreflightResult{Passed: true} // nothing stored in another version
	}
	proof, err := roundtrip.Prove(ctx, d.Dynamic, g.crd, roundtrip.OptionsFor(g.policy.Spec.Migration, target))
	if err != nil {
		reason := ReasonReadFailed
		if errclass.IsConversionError(err) {
			reason = graduation.ReasonConversionFailed
		}
		return graduation.PreflightResult{Reason: reason, Message: fmt.Sprintf("proving the round trip through %s: %v", target, err)}
	}
	status := proof.Status(g.crd.Generation, metav1.NewTime(d.now()))
	g.policy.Status.RoundTrip = &status
	if !proof.Lossless() {
		result := graduation.PreflightResult{Reason: graduation.ReasonConversionLossy, Message: proof.Message()}
		result.Lost, result.AcceptLoss = proof.LostPaths(), d.AcceptLoss
		return result
	}
	return graduation.PreflightResult{Passed: true}
}

// Preflight reads a sample of objects at the target version, which makes
// the API server convert them (exercising the conversion webhook), and
// writes them back as a dry run, which exercises validation and admission,
// before anything is changed. The dry run takes the path the migration will
// take: the same subresource, the same patch and preconditions.
func Preflight(ctx context.Context, dyn dynamic.Interface, crd *apiextensionsv1.CustomResourceDefinition, target string,
	writeTo migration.WriteTarget) graduation.PreflightResult {
	gvr := graduation.ResourceAt(crd, target)
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: PreflightSample})
	if err != nil {
		reason := ReasonReadFailed
		if errclass.IsConversionError(err) {
			reason = graduation.ReasonConversionFailed
		}
		return graduation.PreflightResult{Reason: reason, Message: fmt.Sprintf("reading %s at %s: %v", crd.Spec.Names.Plural, target, err)}
	}
	for _, obj := range list.Items {
		patch := migration.NoOpPatch(migration.ObjectVersion{UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion()})
		_, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, writeTo.Subresources()...)
		if err == nil || apierrors.IsConflict(err) {
			continue
		}
		if apierrors.IsNotFound(err) {
			// Deleted since the LIST, or a subresource that is not there:
			// only a read tells them apart.
			if _, getErr := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(getErr) {
				continue
			}
		}
		reason := ReasonWriteRejected
		if errclass.IsConversionError(err) {
			reason = graduation.ReasonConversionFailed
		}
		return graduation.PreflightResult{Reason: reason, Message: fmt.Sprintf("a no-op write of %s at %s was refused: %v",
			klog.KObj(&obj), target, err)}
	}
	return graduation.PreflightResult{Passed: true}
}

// CheckAccess asks the API server whether the caller may carry out the
// policy's graduation of crd at version (see mayMigrate), for a door that
// checks before it writes state of its own.
func (d *Driver) CheckAccess(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	return d.mayMigrate(ctx, policy, crd, version)
}

// mayMigrate asks the API server whether the caller may list, read and
// patch the CRD's objects at version (and their /status for writeTo:
// Status), drive the in-tree migrator when that is the engine, and do what
// the door needs besides (Driver.Needs). A denial is an *access.Denied,
// which names the RBAC rules to add and stalls the graduation with reason
// Forbidden before anything is switched or written.
func (d *Driver) mayMigrate(ctx context.Context, policy *graduatorv1alpha1.CRDVersionPolicy,
	crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	resource := graduation.ResourceAt(crd, version)
	needs := access.Needs(resource, policy.Spec.Migration.WriteTo)
	if d.Needs != nil {
		needs = append(needs, d.Needs(crd)...)
	}
	if err := access.CheckNeeds(ctx, d.Reviews, resource, needs); err != nil {
		// The error names the resource already; a condition message keeps
		// 600 characters, which a long group name repeated would exceed.
		return fmt.Errorf("check access: %w", err)
	}
	if policy.Spec.Migration.Engine == graduatorv1alpha1.EngineStorageVersionMigration {
		// A server before 1.37 has no storagemigration.k8s.io/v1: refused
		// with the release it needs, before anything is written.
		if err := storagemigration.Served(d.Discovery); err != nil {
			return err
		}
		if err := access.CheckInTree(ctx, d.Reviews); err != nil {
			return fmt.Errorf("check access: %w", err)
		}
	}
	return nil
}

// StorageSettled reports whether API discovery advertises the CRD's current
// storage version. Discovery can show the new hash while the server still
// writes the old version (kubernetes #130235), which is why the plan also
// waits for the settle delay.
func StorageSettled(ctx context.Context, disco discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
	if crd == nil {
		return false, nil
	}
	storage := graduation.StorageVersion(crd)
	if len(crd.Status.StoredVersions) == 1 && crd.Status.StoredVersions[0] == storage {
		return true, nil // nothing to migrate; discovery does not matter
	}
	resources, err := disco.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + storage)
	switch {
	case apierrors.IsNotFound(err):
		// Not served yet: the API server has not caught up with the CRD.
		log.FromContext(ctx).V(1).Info("discovery does not serve the storage version yet", "version", storage)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s/%s: %w", crd.Spec.Group, storage, err)
	}
	want := apidiscovery.StorageVersionHash(crd.Spec.Group, storage, crd.Spec.Names.Kind)
	for _, res := range resources.APIResources {
		if res.Name == crd.Spec.Names.Plural {
			return res.StorageVersionHash == want, nil
		}
	}
	return false, nil
}

// switchStorage makes target the storage version. Only the storage flags
// change; the optimistic lock makes a concurrent edit of the CRD fail the
// write instead of being overwritten.
func (d *Driver) switchStorage(ctx context.Context, g *run, target string) error {
	crd := g.crd
	from := graduation.StorageVersion(crd)
	if err := d.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		v.Storage = v.Name == target
	}); err != nil {
		return fmt.Errorf("switch the storage version of %s to %s: %w", crd.Name, target, err)
	}
	d.Reporter.Event(g.policy, crd, corev1.EventTypeNormal, ReasonStorageSwitched, "SwitchStorage",
		fmt.Sprintf("the storage version is now %s (was %s)", target, from))
	return nil
}

// serve serves version, the storage version to be (a rollback) or the one
// the CRD stores without serving it.
func (d *Driver) serve(ctx context.Context, g *run, version string) error {
	crd := g.crd
	if err := d.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		if v.Name == version {
			v.Served = true
		}
	}); err != nil {
		return fmt.Errorf("serve %s of %s: %w", version, crd.Name, err)
	}
	d.Reporter.Event(g.policy, crd, corev1.EventTypeNormal, ReasonVersionServed, "Serve",
		fmt.Sprintf("%s is served again, to become (or stay) the storage version", version))
	return nil
}

// deprecate marks versions deprecated with the policy's warnings.
func (d *Driver) deprecate(ctx context.Context, g *run, versions []string) error {
	crd := g.crd
	warnings := map[string]*string{}
	for _, dv := range g.policy.Spec.Deprecate {
		if dv.Warning != "" {
			w := dv.Warning
			warnings[dv.Version] = &w
		}
	}
	if err := d.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		if slices.Contains(versions, v.Name) {
			v.Deprecated = true
			v.DeprecationWarning = warnings[v.Name]
		}
	}); err != nil {
		return fmt.Errorf("deprecate %s of %s: %w", strings.Join(versions, ", "), crd.Name, err)
	}
	d.Reporter.Event(g.policy, crd, corev1.EventTypeNormal, ReasonVersionsDeprecated, "Deprecate",
		fmt.Sprintf("marked %s deprecated", strings.Join(versions, ", ")))
	return nil
}

// unserve stops serving versions. It checks the invariant again at the last
// moment: never the storage version, never a version still stored.
func (d *Driver) unserve(ctx context.Context, g *run, versions []string) error {
	crd := g.crd
	for _, v := range versions {
		if v == graduation.StorageVersion(crd) || slices.Contains(crd.Status.StoredVersions, v) {
			return fmt.Errorf("refusing to unserve %s of %s: it is the storage version or still stored", v, crd.Name)
		}
	}
	if err := d.patchVersions(ctx, crd, func(v *apiextensionsv1.CustomResourceDefinitionVersion) {
		if slices.Contains(versions, v.Name) {
			v.Served = false
		}
	}); err != nil {
		return fmt.Errorf("unserve %s of %s: %w", strings.Join(versions, ", "), crd.Name, err)
	}
	d.Reporter.Event(g.policy, crd, corev1.EventTypeNormal, ReasonVersionsUnserved, "Unserve",
		fmt.Sprintf("%s no longer served; set served: true to roll back", strings.Join(versions, ", ")))
	return nil
}

// patchVersions changes flags of spec.versions. spec.versions is an atomic
// list, so the whole list is written, under an optimistic lock.
func (d *Driver) patchVersions(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition,
	change func(*apiextensionsv1.CustomResourceDefinitionVersion)) error {
	updated := crd.DeepCopy()
	for i := range updated.Spec.Versions {
		change(&updated.Spec.Versions[i])
	}
	return d.Client.Patch(ctx, updated, client.MergeFromWithOptions(crd, client.MergeFromWithOptimisticLock{}))
}

// prune sets status.storedVersions to the storage version, refused by the
// engine when the CRD changed since the run started (or since the one edit
// the run was carried across).
func (d *Driver) prune(ctx context.Context, g *run, target string) error {
	crd, r := g.crd, g.policy.Status.Migration
	before := slices.Clone(crd.Status.StoredVersions)
	graduation.CarryRun(r, crd)
	failpoint.Pause(ctx, failpoint.Prune)
	err := migration.PruneStoredVersions(ctx, d.Client, crd.Name, migration.Expectation{
		StorageVersion: target, Generation: r.CRDGeneration, Complete: r.CompletedAt != nil, Failed: r.Failed,
	})
	if err != nil {
		return fmt.Errorf("prune storedVersions of %s: %w", crd.Name, err)
	}
	// The status tells the check the prune rested on, the latest.
	settle := graduation.SettleDelay(g.policy.Spec.Migration)
	r.APIServersCheck = truncate(graduation.ServersChecked(g.servers, settle), maxStatusText)
	msg := fmt.Sprintf("status.storedVersions pruned from [%s] to [%s]", strings.Join(before, ", "), target)
	if clock := graduation.PruneRestsOnClock(g.servers, settle); clock != "" {
		msg += "; " + clock
	}
	d.Reporter.Event(g.policy, crd, corev1.EventTypeNormal, ReasonStoredVersionsPruned, "Prune", msg)
	return nil
}

// cleanupManagedFields drops managedFields entries of versions that are no
// longer served from every object: they would break later server-side applies.
func (d *Driver) cleanupManagedFields(ctx context.Context, g *run, versions []string) error {
	crd := g.crd
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	resource := graduation.ResourceAt(crd, graduation.StorageVersion(crd))
	engine := d.engineOptions(g.policy.Spec.Migration, resource, migration.Progress{})
	var own migration.SpaceLedger
	if r := g.policy.Status.Migration; r != nil {
		own = ledgerOf(r.Space)
	}
	res, err := migration.CleanupManagedFieldsWithin(ctx, d.Dynamic, resource, served, migration.CleanupOptions{
		Config: engine.Config, EtcdQuota: engine.EtcdQuota, Previous: own,
	})
	if r := g.policy.Status.Migration; r != nil {
		r.Space = ledgerStatus(res.Space)
	}
	if err != nil {
		return fmt.Errorf("clean managedFields of %s (etcd space budget %s): %w", crd.Name, res.SpaceBudgetReason, err)
	}
	for i := range g.policy.Status.Versions {
		if slices.Contains(versions, g.policy.Status.Versions[i].Name) {
			g.policy.Status.Versions[i].ManagedFieldsCleaned = true
		}
	}
	d.Reporter.Event(g.policy, crd, corev1.EventTypeNormal, ReasonManagedFieldsCleaned, "CleanupManagedFields",
		fmt.Sprintf("removed managedFields entries of %s from %d objects; %d waits for etcd's compaction, etcd space budget %s",
			strings.Join(versions, ", "), res.Cleaned, res.CompactionWaits, truncate(res.SpaceBudgetReason, maxStatusText)))
	return nil
}
