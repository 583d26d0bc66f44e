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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graduator/graduator/graduation"
	"github.com/graduator/graduator/internal/steps"
	"github.com/graduator/graduator/migration"
)

// settleDelay is how long Graduate waits after discovery shows the new
// storage version: one API server, so a moment is enough (the operator and
// crdmigrate wait 10 s by default, for HA control planes).
const settleDelay = time.Second

// Report is what a graduation did, with what etcd held before and after.
type Report struct {
	// CRD is the CRD's name; Version the storage version it graduated to.
	CRD, Version string
	// Before and After are what etcd held before the migration and after the
	// prune.
	Before, After Storage
	// StoredVersionsBefore and StoredVersionsAfter are the CRD's
	// status.storedVersions around the graduation.
	StoredVersionsBefore, StoredVersionsAfter []string
	// Migration is the engine's result.
	Migration migration.Result
}

// String reads as a short account: storage before and after, the counts
// and storedVersions.
func (r Report) String() string {
	return fmt.Sprintf("graduated %s to %s: before: %s; after: %s; %d rewritten, %d skipped, %d caught up, %d failed; "+
		"storedVersions [%s] -> [%s]", r.CRD, r.Version, r.Before, r.After, r.Migration.Rewritten, r.Migration.Skipped,
		r.Migration.CaughtUp, r.Migration.Failed, strings.Join(r.StoredVersionsBefore, ", "), strings.Join(r.StoredVersionsAfter, ", "))
}

// Graduate makes version the storage version of the CRD named crdName (when
// it is not yet), and does in-process what the Graduator operator and the
// crdmigrate controller do: wait until discovery advertises the new storage
// version, preflight (a sample read and dry-run write at version), run the
// migration engine, and prune status.storedVersions, which it refuses after
// a partial run. It then reads etcd and fails the test unless every object
// is stored as version and storedVersions is [version].
func (r *Rehearsal) Graduate(ctx context.Context, crdName, version string) Report {
	r.helper()
	report, err := r.TryGraduate(ctx, crdName, version)
	r.fatal(err)
	return report
}

// TryGraduate is Graduate returning an error (with the report so far).
func (r *Rehearsal) TryGraduate(ctx context.Context, crdName, version string) (Report, error) {
	report := Report{CRD: crdName, Version: version}
	crd, err := r.crd(ctx, crdName)
	if err != nil {
		return report, err
	}
	report.StoredVersionsBefore = crd.Status.StoredVersions
	if report.Before, err = r.TryStored(ctx, crdName); err != nil {
		return report, err
	}
	if crd, err = r.switchStorage(ctx, crdName, version); err != nil {
		return report, err
	}
	if err := r.waitSettled(ctx, crdName); err != nil {
		return report, err
	}
	if pre := steps.Preflight(ctx, r.Dynamic, crd, version, r.opts.Migration.WriteTo); !pre.Passed {
		return report, fmt.Errorf("the preflight of %s at %s failed (%s): %s", crdName, version, pre.Reason, pre.Message)
	}

	tuning := r.opts.Migration
	report.Migration, err = migration.Run(ctx, r.Dynamic, migration.Options{
		Resource: graduation.ResourceAt(crd, version), Config: r.Config,
		Concurrency: tuning.Concurrency, Priority: tuning.Priority, PageSize: tuning.PageSize, QPS: tuning.QPS, WriteTo: tuning.WriteTo,
	})
	res := report.Migration
	migrateErr := err
	if migrateErr == nil && res.Failed > 0 {
		migrateErr = fmt.Errorf("%d objects could not be rewritten as %s: %s", res.Failed, version, failures(res.Failures))
	}
	pruneErr := migration.PruneStoredVersions(ctx, r.Client, crdName, migration.Expectation{
		StorageVersion: version, Generation: crd.Generation, Complete: res.Complete, Failed: res.Failed,
	})
	if report.After, err = r.TryStored(ctx, crdName); err != nil {
		return report, err
	}
	if crd, err = r.crd(ctx, crdName); err != nil {
		return report, err
	}
	report.StoredVersionsAfter = crd.Status.StoredVersions
	if migrateErr != nil || pruneErr != nil {
		return report, fmt.Errorf("graduate %s to %s: %w (etcd holds %s; storedVersions [%s])", crdName, version,
			errors.Join(migrateErr, pruneErr), report.After, strings.Join(report.StoredVersionsAfter, ", "))
	}
	return report, report.check()
}

// check is the rehearsal's own proof, from etcd, of what the prune assumed.
func (r Report) check() error {
	apiVersion := groupOf(r.CRD) + "/" + r.Version
	pruned := slices.Equal(r.StoredVersionsAfter, []string{r.Version})
	if stale := r.After.NotAs(apiVersion); len(stale) > 0 {
		byVersion := map[string]int{}
		for _, k := range stale {
			byVersion[r.After.Objects[k]]++
		}
		var parts []string
		for v, n := range byVersion {
			parts = append(parts, fmt.Sprintf("%d objects still stored as %s", n, v))
		}
		slices.Sort(parts)
		when := "after the migration"
		if pruned {
			when = "when storedVersions was pruned"
		}
		return fmt.Errorf("%s %s (%s), %s", strings.Join(parts, ", "), when, sample(stale), r)
	}
	if !pruned {
		return fmt.Errorf("status.storedVersions of %s is [%s], not [%s], after the migration", r.CRD,
			strings.Join(r.StoredVersionsAfter, ", "), r.Version)
	}
	return nil
}

// groupOf is the API group of a CRD from its name ("plural.group").
func groupOf(crdName string) string {
	_, group, _ := strings.Cut(crdName, ".")
	return group
}

func sample(keys []string) string {
	const show = 5
	if len(keys) <= show {
		return strings.Join(keys, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(keys[:show], ", "), len(keys)-show)
}

func failures(fs []migration.Failure) string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	return strings.Join(out, "; ")
}

// switchStorage makes version the storage version, as a release's manifest
// would, and returns the CRD as written.
func (r *Rehearsal) switchStorage(ctx context.Context, crdName, version string) (*apiextensionsv1.CustomResourceDefinition, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Client.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
			return err
		}
		if graduation.StorageVersion(&crd) == version {
			return nil
		}
		found := false
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
			found = found || crd.Spec.Versions[i].Storage
		}
		if !found {
			return fmt.Errorf("CRD %s has no version %s", crdName, version)
		}
		return r.Client.Update(ctx, &crd)
	})
	if err != nil {
		return nil, fmt.Errorf("make %s the storage version of %s: %w", version, crdName, err)
	}
	return &crd, nil
}

// waitSettled waits until discovery advertises the storage version, then
// the settle delay.
func (r *Rehearsal) waitSettled(ctx context.Context, crdName string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		crd, err := r.crd(ctx, crdName)
		if err != nil {
			last = err
			return false, nil
		}
		settled, err := steps.StorageSettled(ctx, r.discovery, crd)
		last = err
		return settled, nil
	})
	if err != nil {
		return fmt.Errorf("discovery does not advertise the new storage version of %s: %w", crdName, errors.Join(err, last))
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settleDelay):
		return nil
	}
}
