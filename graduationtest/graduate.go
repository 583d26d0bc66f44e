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
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/driver"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/migration"
)

// settleDelay is how long Graduate waits after discovery shows the new
// storage version where the API servers can be neither asked nor counted:
// an envtest API server is one, checked through the front door (its
// identity Lease and the EndpointSlice's one address say so), so this is a
// fallback where a moment is enough (the operator and crdmigrate wait
// graduation.DefaultSettleDelay there, for HA control planes).
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
// it is not yet), and graduates it in-process with the driver the Graduator
// operator and the crdmigrate controller run (package driver): preflight,
// switch the storage version, wait until discovery advertises it, preflight
// again before the first write, run the migration engine, and prune
// status.storedVersions, which it refuses after a partial run. It then
// reads etcd and fails the test unless every object is stored as version
// and storedVersions is [version].
func (r *Rehearsal) Graduate(ctx context.Context, crdName, version string) Report {
	r.helper()
	report, err := r.TryGraduate(ctx, crdName, version)
	r.fatal(err)
	return report
}

// TryGraduate is Graduate returning an error (with the report so far). A
// step that fails is not retried: the error says which and why.
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

	policy := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: crdName, Generation: 1},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			StorageVersion: version,
			Migration:      driver.Settings(r.opts.Migration.WriteTo, settleDelay, r.opts.AcceptLoss),
		},
	}
	store := &driver.MemoryStore{Policy: policy.DeepCopy()}
	d := r.driver()
	if d.EtcdQuota, err = r.etcdQuota(ctx); err != nil {
		return report, err
	}
	out, err := d.Finish(ctx, store, policy, r.opts.Timeout)
	report.Migration = driver.RunResult(policy.Status)
	graduateErr := err
	switch {
	case graduateErr == nil && out.Failure() != nil:
		graduateErr = out.Failure()
	case graduateErr == nil && out.Step.Phase != graduatorv1alpha1.PhaseGraduated:
		graduateErr = fmt.Errorf("%s (%s)", out.Step.Message(), out.Step.Reason())
	}
	if report.After, err = r.TryStored(ctx, crdName); err != nil {
		return report, err
	}
	if crd, err = r.crd(ctx, crdName); err != nil {
		return report, err
	}
	report.StoredVersionsAfter = crd.Status.StoredVersions
	if graduateErr != nil {
		return report, fmt.Errorf("graduate %s to %s: %w (etcd holds %s; storedVersions [%s])", crdName, version,
			graduateErr, report.After, strings.Join(report.StoredVersionsAfter, ", "))
	}
	return report, report.check()
}

// etcdQuota is the quota the migration is told: the tuning's, else the one
// the rehearsal's own etcd reports, so that a rehearsal runs at the pace
// of its etcd's quota and not of an assumed one.
func (r *Rehearsal) etcdQuota(ctx context.Context) (int64, error) {
	if q := r.opts.Migration.EtcdQuota; q > 0 {
		return q, nil
	}
	return r.Etcd.Quota(ctx)
}

// driver is the graduation's driver with the rehearsal's clients, telling
// each step in the test's log.
func (r *Rehearsal) driver() *driver.Driver {
	tuning := r.opts.Migration
	return &driver.Driver{
		Clients:          r.clients,
		Reporter:         reporter{r.t},
		Engine:           &tuning,
		EtcdQuotaSetting: "graduationtest.Options.Migration.EtcdQuota",
		AcceptLoss:       "graduationtest.Options.AcceptLoss",
	}
}

// reporter tells the steps in the test's log, when there is one.
type reporter struct{ t TB }

func (rep reporter) Event(_ *graduatorv1alpha1.CRDVersionPolicy, _ *apiextensionsv1.CustomResourceDefinition,
	eventType, reason, action, message string) {
	if l, ok := rep.t.(interface{ Logf(string, ...any) }); ok {
		l.Logf("%s %s (%s): %s", action, reason, eventType, message)
	}
}

func (reporter) Planned(*graduatorv1alpha1.CRDVersionPolicy, graduation.Step, graduatorv1alpha1.Phase) {
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
