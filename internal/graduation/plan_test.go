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

package graduation_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/access"
	"github.com/graduator/graduator/internal/graduation"
)

func TestGraduation(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "graduation")
}

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

// crd builds pizzas.restaurant.example.com with the given versions; the
// first letter of each flag string says served (s), storage (S),
// deprecated (d): "sS" is a served storage version.
type ver struct {
	name, flags string
	schema      string
}

func crd(stored []string, versions ...ver) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "pizzas.restaurant.example.com", Generation: 5},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:      "restaurant.example.com",
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
	for _, v := range versions {
		cv := apiextensionsv1.CustomResourceDefinitionVersion{Name: v.name}
		for _, f := range v.flags {
			switch f {
			case 's':
				cv.Served = true
			case 'S':
				cv.Storage = true
			case 'd':
				cv.Deprecated = true
			}
		}
		schema := v.schema
		if schema == "" {
			schema = v.name
		}
		cv.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Description: schema,
		}}
		c.Spec.Versions = append(c.Spec.Versions, cv)
	}
	return c
}

// inTreeMigrating marks the CRD as the in-tree migrator does while it runs:
// StorageMigrating=True observed at the given generation.
func inTreeMigrating(c *apiextensionsv1.CustomResourceDefinition, generation int64) *apiextensionsv1.CustomResourceDefinition {
	c.Status.Conditions = append(c.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.StorageMigrating, Status: apiextensionsv1.ConditionTrue, ObservedGeneration: generation,
	})
	return c
}

// inTreeDone marks the CRD as a finished in-tree run leaves it.
func inTreeDone(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c.Status.Conditions = append(c.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.StorageMigrating, Status: apiextensionsv1.ConditionFalse, ObservedGeneration: c.Generation,
	})
	return c
}

type policyOpt func(*graduatorv1alpha1.CRDVersionPolicy)

func policy(storage string, opts ...policyOpt) *graduatorv1alpha1.CRDVersionPolicy {
	p := &graduatorv1alpha1.CRDVersionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "pizzas.restaurant.example.com"},
		Spec: graduatorv1alpha1.CRDVersionPolicySpec{
			StorageVersion:       storage,
			CleanupManagedFields: ptr.To(true),
			Migration:            graduatorv1alpha1.MigrationSettings{SettleDelay: &metav1.Duration{Duration: 10 * time.Second}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unserve(version string, after time.Duration) policyOpt {
	return func(p *graduatorv1alpha1.CRDVersionPolicy) {
		p.Spec.Unserve = append(p.Spec.Unserve, graduatorv1alpha1.UnservedVersion{
			Version: version, After: &metav1.Duration{Duration: after},
		})
	}
}

func deprecate(version, warning string) policyOpt {
	return func(p *graduatorv1alpha1.CRDVersionPolicy) {
		p.Spec.Deprecate = append(p.Spec.Deprecate, graduatorv1alpha1.DeprecatedVersion{Version: version, Warning: warning})
	}
}

func paused(p *graduatorv1alpha1.CRDVersionPolicy) { p.Spec.Paused = true }

func writeToStatus(p *graduatorv1alpha1.CRDVersionPolicy) {
	p.Spec.Migration.WriteTo = graduatorv1alpha1.WriteToStatus
}

// withStatusSubresource enables the status subresource on the named version.
func withStatusSubresource(c *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.CustomResourceDefinition {
	for i := range c.Spec.Versions {
		if c.Spec.Versions[i].Name == version {
			c.Spec.Versions[i].Subresources = &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
			}
		}
	}
	return c
}

// storedSince records that the storage version was observed d ago.
func storedSince(version string, d time.Duration) policyOpt {
	return func(p *graduatorv1alpha1.CRDVersionPolicy) {
		p.Status.StorageVersion = version
		p.Status.StorageVersionSince = ago(d)
	}
}

func run(r graduatorv1alpha1.MigrationStatus) policyOpt {
	return func(p *graduatorv1alpha1.CRDVersionPolicy) { p.Status.Migration = &r }
}

func versionStatus(vs ...graduatorv1alpha1.VersionStatus) policyOpt {
	return func(p *graduatorv1alpha1.CRDVersionPolicy) { p.Status.Versions = vs }
}

type expect struct {
	action       graduation.Action
	phase        graduatorv1alpha1.Phase
	versions     []string
	restart      bool
	requeue      time.Duration
	readyReason  string
	readyStatus  metav1.ConditionStatus
	condition    string // a condition to check besides Ready
	condStatus   metav1.ConditionStatus
	condReason   string
	messageParts []string
}

var _ = Describe("Plan", func() {
	alpha := ver{name: "v1alpha1", flags: "sS"}
	alphaServed := ver{name: "v1alpha1", flags: "s"}
	alphaDeprecated := ver{name: "v1alpha1", flags: "sd"}
	alphaUnserved := ver{name: "v1alpha1", flags: "d"}
	beta := ver{name: "v1beta1", flags: "s"}
	betaStorage := ver{name: "v1beta1", flags: "sS"}
	migrated := graduatorv1alpha1.MigrationStatus{
		StorageVersion: "v1beta1", CRDGeneration: 5, Listed: 10, Rewritten: 9, Skipped: 1,
		StartedAt: ago(time.Minute), CompletedAt: ago(30 * time.Second),
	}
	settled := true
	preflightOK := &graduation.PreflightResult{Passed: true}

	DescribeTable("the next step",
		func(c *apiextensionsv1.CustomResourceDefinition, p *graduatorv1alpha1.CRDVersionPolicy,
			preflight *graduation.PreflightResult, storageSettled bool, want expect) {
			step := graduation.Plan(graduation.Input{
				CRD: c, Policy: p, Now: now, Preflight: preflight, StorageSettled: storageSettled,
			})
			Expect(step.Action).To(Equal(want.action), "action; Ready says %q", step.Message())
			Expect(step.Phase).To(Equal(want.phase), "phase")
			Expect(step.Restart).To(Equal(want.restart), "restart")
			if want.versions != nil {
				Expect(step.Versions).To(Equal(want.versions))
			}
			Expect(step.RequeueAfter).To(Equal(want.requeue), "requeue after")

			ready := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionReady)
			Expect(ready).NotTo(BeNil())
			readyStatus := want.readyStatus
			if readyStatus == "" {
				readyStatus = metav1.ConditionFalse
			}
			Expect(ready.Status).To(Equal(readyStatus), "Ready: %s", ready.Message)
			Expect(ready.Reason).To(Equal(want.readyReason), "Ready: %s", ready.Message)
			for _, part := range want.messageParts {
				Expect(ready.Message).To(ContainSubstring(part))
			}
			if want.condition != "" {
				cond := meta.FindStatusCondition(step.Conditions, want.condition)
				Expect(cond).NotTo(BeNil(), want.condition)
				Expect(cond.Status).To(Equal(want.condStatus), "%s: %s", want.condition, cond.Message)
				Expect(cond.Reason).To(Equal(want.condReason), "%s: %s", want.condition, cond.Message)
			}
			// Every condition is always reported, so kubectl wait never
			// waits on a condition that does not exist.
			for _, t := range []string{
				graduatorv1alpha1.ConditionReady, graduatorv1alpha1.ConditionPreflightPassed,
				graduatorv1alpha1.ConditionStorageVersionSet, graduatorv1alpha1.ConditionMigrated,
				graduatorv1alpha1.ConditionStoredVersionsPruned, graduatorv1alpha1.ConditionVersionsRetired,
				graduatorv1alpha1.ConditionReconciling, graduatorv1alpha1.ConditionStalled,
			} {
				Expect(meta.FindStatusCondition(step.Conditions, t)).NotTo(BeNil(), t)
			}
		},

		// Refusals: nothing is changed.
		Entry("a paused policy does nothing",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1", paused), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhasePending, readyReason: graduation.ReasonPaused}),
		Entry("a policy for a missing CRD is blocked with CRDNotFound",
			nil, policy("v1beta1"), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, readyReason: graduation.ReasonCRDNotFound,
				messageParts: []string{"pizzas.restaurant.example.com does not exist"}}),
		Entry("an unknown storage version is blocked with UnknownVersion",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v2"), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonUnknownVersion, messageParts: []string{`"v2"`, "v1alpha1, v1beta1", "nothing was changed"}}),
		Entry("a typo in the versions to unserve is blocked with UnknownVersion",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1", unserve("v1alpah1", 0)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonUnknownVersion, messageParts: []string{"v1alpah1"}}),
		Entry("an unserved target version is blocked",
			crd([]string{"v1alpha1"}, alpha, ver{name: "v1beta1"}), policy("v1beta1"), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonVersionNotServed}),
		Entry("a rollback to an older, unserved version serves it first",
			crd([]string{"v1beta1"}, ver{name: "v1alpha1"}, betaStorage), policy("v1alpha1"), nil, settled,
			expect{action: graduation.ActionServe, phase: graduatorv1alpha1.PhasePreflight, readyReason: graduation.ReasonInProgress,
				messageParts: []string{"rolling back from v1beta1 to v1alpha1", "serving v1alpha1"},
				condition:    graduatorv1alpha1.ConditionStorageVersionSet, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonSwitchPending}),
		Entry("a rollback to an older, served version proves the round trip before the switch",
			crd([]string{"v1beta1"}, alphaServed, betaStorage), policy("v1alpha1"), nil, settled,
			expect{action: graduation.ActionPreflight, phase: graduatorv1alpha1.PhasePreflight, readyReason: graduation.ReasonInProgress}),
		Entry("a rollback switches storage once the proof passed",
			crd([]string{"v1beta1"}, alphaServed, betaStorage), policy("v1alpha1"), preflightOK, settled,
			expect{action: graduation.ActionSwitchStorage, phase: graduatorv1alpha1.PhaseSwitchingStorage, readyReason: graduation.ReasonInProgress}),
		Entry("a managed storage version the CRD does not serve is served first",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, ver{name: "v1beta1", flags: "S"}), policy("v1beta1"), nil, !settled,
			expect{action: graduation.ActionServe, phase: graduatorv1alpha1.PhasePreflight, readyReason: graduation.ReasonInProgress,
				messageParts: []string{"serving v1beta1", "no hash"}}),
		Entry("an unserved storage version in GitOps mode is named with what to do, not waited on",
			crd([]string{"v1beta1", "v1alpha1"}, ver{name: "v1alpha1", flags: "S"}, beta), policy(""), nil, !settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason:  graduation.ReasonVersionNotServed,
				messageParts: []string{"v1alpha1 is the storage version", "not served", "serve v1alpha1", "graduator prepare", "nothing was rewritten"},
				condition:    graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonVersionNotServed}),
		Entry("different schemas without a conversion webhook are blocked before the switch",
			func() *apiextensionsv1.CustomResourceDefinition {
				c := crd([]string{"v1alpha1"}, alpha, beta)
				c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
				return c
			}(), policy("v1beta1"), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonConversionNotConfigured,
				condition:   graduatorv1alpha1.ConditionPreflightPassed, condStatus: metav1.ConditionFalse,
				condReason: graduation.ReasonConversionNotConfigured}),

		Entry("writeTo Status without a status subresource is blocked before anything changes",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1", writeToStatus), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason:  graduation.ReasonStatusSubresourceMissing,
				messageParts: []string{"v1beta1", "no status subresource", "writeTo: Object", "nothing was changed"}}),
		Entry("writeTo Status without a status subresource is blocked in GitOps mode too, before the migration",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("", writeToStatus, storedSince("v1beta1", time.Minute)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonStatusSubresourceMissing}),
		Entry("writeTo Status with a status subresource runs the preflight",
			withStatusSubresource(crd([]string{"v1alpha1"}, alpha, beta), "v1beta1"), policy("v1beta1", writeToStatus), nil, settled,
			expect{action: graduation.ActionPreflight, phase: graduatorv1alpha1.PhasePreflight, readyReason: graduation.ReasonInProgress}),

		// Preflight and the storage switch.
		Entry("a new target runs the preflight first",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"), nil, settled,
			expect{action: graduation.ActionPreflight, phase: graduatorv1alpha1.PhasePreflight, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionStorageVersionSet, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonSwitchPending}),
		Entry("identical schemas need no conversion webhook",
			func() *apiextensionsv1.CustomResourceDefinition {
				c := crd([]string{"v1alpha1"}, ver{name: "v1alpha1", flags: "sS", schema: "same"}, ver{name: "v1beta1", flags: "s", schema: "same"})
				c.Spec.Conversion = nil
				return c
			}(), policy("v1beta1"), nil, settled,
			expect{action: graduation.ActionPreflight, phase: graduatorv1alpha1.PhasePreflight, readyReason: graduation.ReasonInProgress}),
		Entry("a failed preflight blocks and names the cause",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"),
			&graduation.PreflightResult{Reason: "ConversionFailed", Message: "default/margherita: conversion webhook unavailable"}, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonPreflightFailed, messageParts: []string{"default/margherita", "nothing was changed"},
				condition: graduatorv1alpha1.ConditionPreflightPassed, condStatus: metav1.ConditionFalse, condReason: "ConversionFailed"}),
		Entry("a lossy conversion blocks with the policy's way to accept the loss",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"),
			&graduation.PreflightResult{Reason: graduation.ReasonConversionLossy, Message: "v1alpha1 -> v1beta1 -> v1alpha1 loses /spec/replicas"}, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonConversionLossy, messageParts: []string{"loses /spec/replicas", "list the paths in spec.migration.acceptLoss"},
				condition: graduatorv1alpha1.ConditionPreflightPassed, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonConversionLossy}),
		Entry("a lossy conversion blocks with the door's way to accept the loss",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"),
			&graduation.PreflightResult{Reason: graduation.ReasonConversionLossy, Message: "v1alpha1 -> v1beta1 -> v1alpha1 loses /spec/replicas",
				Lost: []string{"/spec/replicas"}, AcceptLoss: graduation.AcceptLossFlag}, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonConversionLossy, messageParts: []string{"or accept them with --accept-loss /spec/replicas;"},
				condition: graduatorv1alpha1.ConditionPreflightPassed, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonConversionLossy}),
		Entry("a passed preflight switches the storage version",
			crd([]string{"v1alpha1"}, alpha, beta), policy("v1beta1"), &graduation.PreflightResult{Passed: true}, settled,
			expect{action: graduation.ActionSwitchStorage, phase: graduatorv1alpha1.PhaseSwitchingStorage, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionPreflightPassed, condStatus: metav1.ConditionTrue, condReason: graduation.ReasonPreflightSucceeded}),

		// Settling and migrating.
		Entry("a run with rejected objects says so in Ready while it goes on",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(graduatorv1alpha1.MigrationStatus{
				StorageVersion: "v1beta1", CRDGeneration: 5, Listed: 100, Rewritten: 90, Failed: 10, StartedAt: ago(time.Minute),
				Failures: []graduatorv1alpha1.MigrationFailure{{Namespace: "default", Name: "frozen", Reason: "admission webhook denied"}},
			})), nil, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, readyReason: graduation.ReasonMigrationFailed,
				messageParts: []string{"10 could not be rewritten so far", "default/frozen", "admission webhook denied"}}),
		Entry("the migration waits while discovery still shows the old storage version",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("v1beta1", storedSince("v1beta1", time.Minute)), nil, false,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 2 * time.Second, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonSettling}),
		Entry("the migration waits for the settle delay after the switch",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("v1beta1", storedSince("v1beta1", 4*time.Second)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 6 * time.Second, readyReason: graduation.ReasonInProgress}),
		Entry("a settled switch preflights before the first write of the run",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("v1beta1", storedSince("v1beta1", time.Minute)), nil, settled,
			expect{action: graduation.ActionPreflight, phase: graduatorv1alpha1.PhaseMigrating, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonPreflightPending}),
		Entry("a preflight that fails before the first write blocks the run: nothing is rewritten",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("", storedSince("v1beta1", time.Minute)),
			&graduation.PreflightResult{Reason: "WriteRejected", Message: "denied by admission"}, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: graduation.BlockedRetryInterval,
				readyReason: graduation.ReasonPreflightFailed, readyStatus: metav1.ConditionFalse, messageParts: []string{"denied by admission", "nothing was rewritten"},
				condition: graduatorv1alpha1.ConditionPreflightPassed, condStatus: metav1.ConditionFalse, condReason: "WriteRejected"}),
		Entry("a settled switch starts a new migration",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("v1beta1", storedSince("v1beta1", time.Minute)), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("an in-tree StorageVersionMigration running on the CRD: no run of ours beside it",
			inTreeMigrating(crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), 5),
			policy("v1beta1", storedSince("v1beta1", time.Minute)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 10 * time.Second,
				readyReason: graduation.ReasonInTreeMigrationRunning, messageParts: []string{"in-tree storage migration runs"},
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonInTreeMigrationRunning}),
		Entry("an in-tree StorageVersionMigration running holds back our prune of a complete run too",
			inTreeMigrating(crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), 5),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(migrated)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 10 * time.Second,
				readyReason: graduation.ReasonInTreeMigrationRunning}),
		Entry("a StorageMigrating condition of an older CRD generation is stale: the migration starts",
			inTreeMigrating(crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), 4),
			policy("v1beta1", storedSince("v1beta1", time.Minute)), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("after an in-tree run pruned storedVersions, the plan goes on to retire",
			inTreeDone(crd([]string{"v1beta1"}, alphaServed, betaStorage)),
			policy("v1beta1", storedSince("v1beta1", time.Minute), deprecate("v1alpha1", "use v1beta1")), nil, settled,
			expect{action: graduation.ActionDeprecate, phase: graduatorv1alpha1.PhaseRetiring, versions: []string{"v1alpha1"},
				readyReason: graduation.ReasonInProgress, condition: graduatorv1alpha1.ConditionStoredVersionsPruned,
				condStatus: metav1.ConditionTrue, condReason: graduation.ReasonPruned}),
		Entry("storedVersions pruned by someone else while a run of ours is unfinished proves nothing: the run goes on",
			inTreeDone(crd([]string{"v1beta1"}, alphaServed, betaStorage)),
			policy("v1beta1", storedSince("v1beta1", time.Minute), deprecate("v1alpha1", "use v1beta1"), run(graduatorv1alpha1.MigrationStatus{
				StorageVersion: "v1beta1", CRDGeneration: 5, ContinueToken: "abc", Listed: 500, StartedAt: ago(time.Minute),
			})), nil, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, readyReason: graduation.ReasonInProgress}),
		Entry("an unfinished run resumes from its saved progress",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(graduatorv1alpha1.MigrationStatus{
				StorageVersion: "v1beta1", CRDGeneration: 5, ContinueToken: "abc", Listed: 500, StartedAt: ago(time.Minute),
			})), nil, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, readyReason: graduation.ReasonInProgress}),
		Entry("a CRD change during the run restarts it",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(graduatorv1alpha1.MigrationStatus{
				StorageVersion: "v1beta1", CRDGeneration: 4, ContinueToken: "abc", Listed: 500, StartedAt: ago(time.Minute),
			})), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("a complete run two CRD generations old is never pruned: it runs again (two edits can move the storage version and put it back)",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(func() graduatorv1alpha1.MigrationStatus {
				r := migrated
				r.CRDGeneration = 3
				return r
			}())), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("a complete run one edit of the CRD old, the storage version where it was, is pruned (a version added during the prune)",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage, ver{name: "v1", flags: "s"}),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(func() graduatorv1alpha1.MigrationStatus {
				r := migrated
				r.CRDGeneration = 4
				return r
			}())), preflightOK, settled,
			expect{action: graduation.ActionPrune, phase: graduatorv1alpha1.PhasePruning, readyReason: graduation.ReasonInProgress}),
		Entry("a complete run one generation old of a CRD created again since it started runs again",
			func() *apiextensionsv1.CustomResourceDefinition {
				c := crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage)
				c.CreationTimestamp = *ago(10 * time.Second)
				return c
			}(),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(func() graduatorv1alpha1.MigrationStatus {
				r := migrated
				r.CRDGeneration = 4
				return r
			}())), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("an unfinished run one edit of the CRD old restarts (keeping its checkpoint: the driver's nextRun)",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage, ver{name: "v1", flags: "s"}),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(graduatorv1alpha1.MigrationStatus{
				StorageVersion: "v1beta1", CRDGeneration: 4, ContinueToken: "abc", Listed: 500, StartedAt: ago(time.Minute),
			})), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("a complete run to another version is never pruned: it runs again",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(func() graduatorv1alpha1.MigrationStatus {
				r := migrated
				r.StorageVersion = "v1alpha1"
				return r
			}())), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("a run with failures is never pruned and blocks until the retry",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(func() graduatorv1alpha1.MigrationStatus {
				r := migrated
				r.Failed = 1
				r.CompletedAt = ago(10 * time.Second)
				r.Failures = []graduatorv1alpha1.MigrationFailure{{Namespace: "default", Name: "hawaii", Reason: "admission webhook denied"}}
				return r
			}())), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseBlocked, requeue: 20 * time.Second,
				readyReason: graduation.ReasonMigrationFailed, messageParts: []string{"default/hawaii", "not pruned"},
				condition: graduatorv1alpha1.ConditionStoredVersionsPruned, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonWaitingForMigration}),
		Entry("a run with failures is retried from the start after the retry interval",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Hour), run(func() graduatorv1alpha1.MigrationStatus {
				r := migrated
				r.Failed = 1
				r.CompletedAt = ago(time.Minute)
				return r
			}())), nil, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonMigrationFailed}),
		Entry("a complete clean run on this generation prunes storedVersions",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(migrated)), nil, settled,
			expect{action: graduation.ActionPrune, phase: graduatorv1alpha1.PhasePruning, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionTrue, condReason: graduation.ReasonMigrated}),

		// Retiring.
		Entry("after pruning, listed versions are deprecated first",
			crd([]string{"v1beta1"}, alphaServed, betaStorage),
			policy("v1beta1", deprecate("v1alpha1", "use v1beta1"), unserve("v1alpha1", time.Hour), run(migrated)), nil, settled,
			expect{action: graduation.ActionDeprecate, phase: graduatorv1alpha1.PhaseRetiring, versions: []string{"v1alpha1"},
				readyReason: graduation.ReasonInProgress,
				condition:   graduatorv1alpha1.ConditionStoredVersionsPruned, condStatus: metav1.ConditionTrue, condReason: graduation.ReasonPruned}),
		Entry("a changed warning is written again",
			crd([]string{"v1beta1"}, alphaDeprecated, betaStorage),
			policy("v1beta1", deprecate("v1alpha1", "use v1beta1")), nil, settled,
			expect{action: graduation.ActionDeprecate, phase: graduatorv1alpha1.PhaseRetiring, versions: []string{"v1alpha1"},
				readyReason: graduation.ReasonInProgress}),
		Entry("a deprecated version is served until its grace period ends",
			crd([]string{"v1beta1"}, alphaDeprecated, betaStorage),
			policy("v1beta1", unserve("v1alpha1", time.Hour), versionStatus(graduatorv1alpha1.VersionStatus{
				Name: "v1alpha1", Served: true, Deprecated: true, DeprecatedSince: ago(20 * time.Minute),
			})), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseRetiring, requeue: 40 * time.Minute,
				readyReason: graduation.ReasonGracePeriod, messageParts: []string{"v1alpha1 stops being served in 40m0s"},
				condition: graduatorv1alpha1.ConditionVersionsRetired, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonGracePeriod}),
		Entry("after the grace period the version is unserved",
			crd([]string{"v1beta1"}, alphaDeprecated, betaStorage),
			policy("v1beta1", unserve("v1alpha1", time.Hour), versionStatus(graduatorv1alpha1.VersionStatus{
				Name: "v1alpha1", Served: true, Deprecated: true, DeprecatedSince: ago(2 * time.Hour),
			})), nil, settled,
			expect{action: graduation.ActionUnserve, phase: graduatorv1alpha1.PhaseRetiring, versions: []string{"v1alpha1"},
				readyReason: graduation.ReasonInProgress}),
		Entry("the storage version is never unserved (GitOps mode lets the manifest store it)",
			crd([]string{"v1alpha1"}, ver{name: "v1alpha1", flags: "sSd"}, beta),
			policy("", unserve("v1alpha1", 0)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseRetiring,
				readyReason: graduation.ReasonAwaitingManifestChange, messageParts: []string{"v1alpha1 is still the storage version"}}),
		Entry("an unserved version's managedFields are cleaned",
			crd([]string{"v1beta1"}, alphaUnserved, betaStorage),
			policy("v1beta1", unserve("v1alpha1", 0), versionStatus(graduatorv1alpha1.VersionStatus{Name: "v1alpha1", Deprecated: true})), nil, settled,
			expect{action: graduation.ActionCleanupManagedFields, phase: graduatorv1alpha1.PhaseRetiring, versions: []string{"v1alpha1"},
				readyReason: graduation.ReasonInProgress}),
		Entry("an unserved, cleaned version leaves the CRD graduated",
			crd([]string{"v1beta1"}, alphaUnserved, betaStorage),
			policy("v1beta1", unserve("v1alpha1", 0), versionStatus(graduatorv1alpha1.VersionStatus{Name: "v1alpha1", Deprecated: true, ManagedFieldsCleaned: true})), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseGraduated, readyStatus: metav1.ConditionTrue,
				readyReason: graduation.ReasonGraduated}),
		Entry("a version removed from the CRD after retiring it stays graduated",
			crd([]string{"v1beta1"}, betaStorage),
			policy("v1beta1", unserve("v1alpha1", 0), versionStatus(graduatorv1alpha1.VersionStatus{Name: "v1alpha1", Deprecated: true, ManagedFieldsCleaned: true})), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseGraduated, readyStatus: metav1.ConditionTrue,
				readyReason: graduation.ReasonGraduated}),
		Entry("a CRD that only ever stored the target needs no migration",
			crd([]string{"v1beta1"}, betaStorage), policy("v1beta1"), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseGraduated, readyStatus: metav1.ConditionTrue,
				readyReason: graduation.ReasonGraduated,
				condition:   graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionTrue, condReason: graduation.ReasonNothingToMigrate}),

		// GitOps mode: the CRD manifest owns spec.versions.
		Entry("GitOps mode never switches storage itself; it migrates after the manifest did",
			crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), policy("", storedSince("v1beta1", time.Minute)), preflightOK, settled,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true, readyReason: graduation.ReasonInProgress}),
		Entry("GitOps mode with nothing stale is graduated",
			crd([]string{"v1alpha1"}, alpha, beta), policy(""), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseGraduated, readyStatus: metav1.ConditionTrue, readyReason: graduation.ReasonGraduated}),
		Entry("GitOps mode advises the manifest change instead of unserving",
			crd([]string{"v1beta1"}, alphaDeprecated, betaStorage),
			policy("", unserve("v1alpha1", 0), versionStatus(graduatorv1alpha1.VersionStatus{
				Name: "v1alpha1", Served: true, Deprecated: true, DeprecatedSince: ago(time.Hour),
			})), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseRetiring,
				readyReason: graduation.ReasonAwaitingManifestChange, messageParts: []string{"v1alpha1 is no longer stored: it can be unserved"}}),
		Entry("GitOps mode asks the manifest to deprecate, then unserve, a version no longer stored",
			crd([]string{"v1beta1"}, alphaServed, betaStorage), policy("", unserve("v1alpha1", time.Hour)), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseRetiring,
				readyReason:  graduation.ReasonAwaitingManifestChange,
				messageParts: []string{"v1alpha1 is no longer stored: mark it deprecated, then unserve it after 1h0m0s"}}),
		Entry("GitOps mode advises deprecation instead of writing it",
			crd([]string{"v1beta1"}, alphaServed, betaStorage), policy("", deprecate("v1alpha1", "")), nil, settled,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseRetiring,
				readyReason: graduation.ReasonAwaitingManifestChange, messageParts: []string{"v1alpha1 can be marked deprecated"}}),
	)
})

var _ = Describe("Observe", func() {
	It("keeps when a version was first seen deprecated and when the storage version changed", func() {
		status := &graduatorv1alpha1.CRDVersionPolicyStatus{}
		c := crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "sd"}, ver{name: "v1beta1", flags: "sS"})
		graduation.Observe(c, status, now.Add(-time.Hour))
		Expect(status.StorageVersion).To(Equal("v1beta1"))
		Expect(status.StorageVersionSince.Time).To(Equal(now.Add(-time.Hour)))
		Expect(status.StoredVersions).To(Equal([]string{"v1alpha1", "v1beta1"}))

		graduation.Observe(c, status, now)
		Expect(status.StorageVersionSince.Time).To(Equal(now.Add(-time.Hour)), "unchanged storage keeps its timestamp")
		Expect(status.Versions).To(HaveLen(2))
		Expect(status.Versions[0].Name).To(Equal("v1alpha1"))
		Expect(status.Versions[0].DeprecatedSince.Time).To(Equal(now.Add(-time.Hour)), "deprecation keeps its first timestamp")

		// Un-deprecating and deprecating again restarts the grace period.
		c.Spec.Versions[0].Deprecated = false
		graduation.Observe(c, status, now)
		Expect(status.Versions[0].DeprecatedSince).To(BeNil())
		c.Spec.Versions[0].Deprecated = true
		graduation.Observe(c, status, now)
		Expect(status.Versions[0].DeprecatedSince.Time).To(Equal(now))
	})

	It("remembers versions removed from the CRD", func() {
		status := &graduatorv1alpha1.CRDVersionPolicyStatus{}
		graduation.Observe(crd([]string{"v1beta1"}, ver{name: "v1alpha1", flags: "d"}, ver{name: "v1beta1", flags: "sS"}), status, now)
		graduation.Observe(crd([]string{"v1beta1"}, ver{name: "v1beta1", flags: "sS"}), status, now)
		Expect(status.Versions).To(ConsistOf(
			HaveField("Name", "v1beta1"),
			And(HaveField("Name", "v1alpha1"), HaveField("Served", false)),
		))
	})

	It("forgets a managedFields cleanup when the version is served again", func() {
		status := &graduatorv1alpha1.CRDVersionPolicyStatus{Versions: []graduatorv1alpha1.VersionStatus{{Name: "v1alpha1", ManagedFieldsCleaned: true}}}
		graduation.Observe(crd([]string{"v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"}), status, now)
		Expect(status.Versions[0].ManagedFieldsCleaned).To(BeFalse())
	})
})

var _ = Describe("Conditions that were True", func() {
	done := []metav1.Condition{
		{Type: graduatorv1alpha1.ConditionPreflightPassed, Status: metav1.ConditionTrue, Reason: graduation.ReasonPreflightSucceeded},
		{Type: graduatorv1alpha1.ConditionMigrated, Status: metav1.ConditionTrue, Reason: graduation.ReasonMigrated, Message: "10 objects rewritten"},
	}
	withDone := func(p *graduatorv1alpha1.CRDVersionPolicy) { p.Status.Conditions = done }
	DescribeTable("stay True when the policy is paused or blocked",
		func(c *apiextensionsv1.CustomResourceDefinition, p *graduatorv1alpha1.CRDVersionPolicy, readyReason string) {
			step := graduation.Plan(graduation.Input{CRD: c, Policy: p, Now: now, StorageSettled: true})
			Expect(step.Reason()).To(Equal(readyReason))
			for _, want := range done {
				got := meta.FindStatusCondition(step.Conditions, want.Type)
				Expect(got).NotTo(BeNil())
				Expect(got.Status).To(Equal(metav1.ConditionTrue), "%s: %s", want.Type, got.Message)
				Expect(got.Reason).To(Equal(want.Reason))
			}
		},
		Entry("paused", crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"}),
			policy("v1beta1", paused, withDone), graduation.ReasonPaused),
		Entry("blocked by a typo", crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"}),
			policy("v1beta1", unserve("v1alpah1", 0), withDone), graduation.ReasonUnknownVersion),
	)
})

var _ = Describe("StallOf: the reason a person reads when a step keeps failing", func() {
	gr := schema.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}
	DescribeTable("each error names its kind of problem",
		func(step string, err error, reason string) {
			stall := graduation.StallOf(step, err, 1)
			Expect(stall.Reason).To(Equal(reason))
			Expect(stall.Message).To(HavePrefix(step+" failed (attempt 1): "), "the message names the step")
			Expect(stall.Message).To(ContainSubstring(strings.Fields(err.Error())[0]), "and quotes the API server")
			Expect(stall.Message).To(HaveSuffix("retrying in 5s"), "and says when the next try is")
		},
		Entry("a conversion webhook down", string(graduation.ActionMigrate), apierrors.NewInternalError(errors.New(
			`conversion webhook for restaurant.example.com/v1alpha1, Kind=Pizza failed: Post "https://127.0.0.1:9/convert": connection refused`)),
			graduation.ReasonConversionFailed),
		Entry("the API server unavailable", string(graduation.ActionPrune), apierrors.NewServiceUnavailable("etcd leader changed"),
			graduation.ReasonAPIUnavailable),
		Entry("a refused connection", string(graduation.ActionMigrate),
			fmt.Errorf("list pizzas: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), graduation.ReasonAPIUnavailable),
		Entry("a client timeout", string(graduation.ActionMigrate), fmt.Errorf("list pizzas: %w", context.DeadlineExceeded),
			graduation.ReasonAPIUnavailable),
		Entry("RBAC", string(graduation.ActionMigrate), apierrors.NewForbidden(gr, "", errors.New(`User "graduator" cannot list resource "pizzas"`)),
			graduation.ReasonForbidden),
		Entry("a conflict that keeps recurring", string(graduation.ActionDeprecate), apierrors.NewConflict(gr, "pizzas", errors.New("modified")),
			graduation.ReasonConflict),
		Entry("discovery", graduation.StepDiscovery, errors.New("the server could not find the requested resource"),
			graduation.ReasonDiscoveryFailed),
		Entry("discovery refused by RBAC is Forbidden", graduation.StepDiscovery, apierrors.NewForbidden(gr, "", errors.New("cannot get path")),
			graduation.ReasonForbidden),
		Entry("anything else names the step", string(graduation.ActionCleanupManagedFields), errors.New("boom"),
			graduation.ReasonStepFailed),
		Entry("etcd is full (NOSPACE)", string(graduation.ActionMigrate),
			apierrors.NewInternalError(errors.New("etcdserver: mvcc: database space exceeded")), graduation.ReasonEtcdSpaceExceeded),
	)
	It("tells what to do when etcd is full, however long the error", func() {
		err := fmt.Errorf("rewrite pizzas %s: %w", strings.Repeat("x", 5000),
			apierrors.NewInternalError(errors.New("etcdserver: mvcc: database space exceeded")))
		stall := graduation.StallOf("Migrate", err, 1)
		Expect(stall.Reason).To(Equal(graduation.ReasonEtcdSpaceExceeded))
		Expect(stall.Message).To(ContainSubstring("etcdctl defrag"))
		Expect(stall.Message).To(ContainSubstring("etcdctl alarm disarm"))
		Expect(stall.Message).To(HaveSuffix("retrying in 5s"))
	})
	It("keeps a denial's rules whole, however many", func() {
		denied := &access.Denied{Resource: schema.GroupVersionResource{Group: "restaurant.example.com", Version: "v1", Resource: "pizzas"}}
		for _, verb := range []string{"list", "get", "patch"} {
			denied.Missing = append(denied.Missing, authorizationv1.ResourceAttributes{Verb: verb, Group: "restaurant.example.com", Resource: "pizzas"})
		}
		for _, sub := range []string{"", "status", "scale", "finalizers", "approval", "ephemeral"} {
			denied.Missing = append(denied.Missing, authorizationv1.ResourceAttributes{Verb: "patch", Group: apiextensionsv1.GroupName,
				Resource: "customresourcedefinitions", Subresource: sub})
		}
		Expect(len(denied.Error())).To(BeNumerically(">", 600))
		stall := graduation.StallOf("Preflight", fmt.Errorf("check access: %w", denied), 1)
		Expect(stall.Reason).To(Equal(graduation.ReasonForbidden))
		Expect(stall.Message).To(ContainSubstring(denied.Error()))
	})
	It("trims a long error and backs off from 5s doubling to 5m", func() {
		stall := graduation.StallOf("Migrate", errors.New(strings.Repeat("x", 5000)), 3)
		Expect(len(stall.Message)).To(BeNumerically("<", 700))
		Expect(stall.RetryAfter).To(Equal(20 * time.Second))
		Expect(graduation.RetryBackoff(1)).To(Equal(5 * time.Second))
		Expect(graduation.RetryBackoff(7)).To(Equal(5 * time.Minute))
		Expect(graduation.RetryBackoff(40)).To(Equal(5 * time.Minute))
	})
})

var _ = Describe("Plan after a failed step: the last error and the attempts are its input", func() {
	c := crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"})
	running := graduatorv1alpha1.MigrationStatus{StorageVersion: "v1beta1", CRDGeneration: 5, Listed: 100, Rewritten: 40, StartedAt: ago(time.Minute)}
	waitingRun := running
	waitingRun.CompactionWait = "waiting for etcd's next compaction past resourceVersion 5 since 2026-11-26T17:00:00Z: the run's writes " +
		"not compacted yet reached its budget of 16Mi; etcd's database size is unknown and its quota not told: tell the quota with " +
		"the policy's spec.migration.etcdQuota"
	stalledReady := metav1.Condition{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: graduation.ReasonAPIUnavailable, Message: "Migrate failed (attempt 2): etcd leader changed; retrying in 10s"}
	before := []metav1.Condition{
		{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: graduation.ReasonInProgress, Message: "migrating objects to v1beta1"},
		{Type: graduatorv1alpha1.ConditionPreflightPassed, Status: metav1.ConditionTrue, Reason: graduation.ReasonStorageVersionSet, Message: "the CRD already stores v1beta1"},
		{Type: graduatorv1alpha1.ConditionStorageVersionSet, Status: metav1.ConditionTrue, Reason: graduation.ReasonStorageVersionSet, Message: "the CRD stores v1beta1"},
		{Type: graduatorv1alpha1.ConditionStoredVersionsPruned, Status: metav1.ConditionFalse, Reason: graduation.ReasonWaitingForMigration,
			Message: "status.storedVersions is [v1alpha1, v1beta1]; pruned once every object is rewritten as v1beta1"},
		{Type: graduatorv1alpha1.ConditionMigrated, Status: metav1.ConditionFalse, Reason: graduation.ReasonMigrating,
			Message: "rewriting every object as v1beta1: 100 listed, 40 rewritten, 0 skipped, 0 failed so far"},
		{Type: graduatorv1alpha1.ConditionVersionsRetired, Status: metav1.ConditionUnknown, Reason: graduation.ReasonWaitingForPrevious, Message: "waits for the earlier steps"},
	}
	with := func(conditions []metav1.Condition, retries int32) policyOpt {
		return func(p *graduatorv1alpha1.CRDVersionPolicy) {
			p.Status.Phase = graduatorv1alpha1.PhaseMigrating
			p.Status.Conditions = conditions
			p.Status.Retries = retries
		}
	}
	replaced := func(conditions []metav1.Condition, c metav1.Condition) []metav1.Condition {
		out := append([]metav1.Condition(nil), conditions...)
		for i := range out {
			if out[i].Type == c.Type {
				out[i] = c // no timestamp: the reconciler sets those
			}
		}
		return out
	}
	waiting := func(t string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: graduation.ReasonWaitingForPrevious, Message: "waits for the earlier steps"}
	}
	type want struct {
		action     graduation.Action
		phase      graduatorv1alpha1.Phase
		retries    int32
		requeue    time.Duration
		conditions []metav1.Condition
	}
	DescribeTable("Ready says why until a step succeeds; every other condition is the plan's",
		func(p *graduatorv1alpha1.CRDVersionPolicy, failed *graduation.StepError, w want) {
			step := graduation.Plan(graduation.Input{CRD: c, Policy: p, Now: now, StorageSettled: true,
				Failed: failed, Attempts: p.Status.Retries})
			Expect(step.Action).To(Equal(w.action))
			Expect(step.Phase).To(Equal(w.phase))
			Expect(step.Retries).To(Equal(w.retries))
			Expect(step.RequeueAfter).To(Equal(w.requeue))
			Expect(plain(step.Conditions)).To(ConsistOf(plain(w.conditions)))
			Expect(step.Stall != nil).To(Equal(failed != nil))
		},
		Entry("a failed step keeps the phase and every condition, and Ready names the failure and the next try",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(running), with(before, 1)),
			&graduation.StepError{Step: "Migrate", Err: apierrors.NewServiceUnavailable("etcd leader changed")},
			want{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, retries: 2, requeue: 10 * time.Second,
				conditions: replaced(before, stalledReady)}),
		Entry("a step to retry keeps the failure in Ready and counts on",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(running), with(replaced(before, stalledReady), 2)), nil,
			want{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, retries: 2,
				conditions: replaced(before, stalledReady)}),
		Entry("no attempts left to report: Ready is the plan's again",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(running), with(replaced(before, stalledReady), 0)), nil,
			want{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, conditions: before}),
		Entry("a run that waits for etcd's compaction says so in Ready, with where to tell the quota",
			policy("v1beta1", storedSince("v1beta1", time.Minute), run(waitingRun), with(before, 0)), nil,
			want{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, conditions: replaced(before,
				metav1.Condition{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: graduation.ReasonInProgress,
					Message: "migrating objects to v1beta1: " + waitingRun.CompactionWait})}),
		Entry("nothing left to do (paused) ends the retries",
			policy("v1beta1", paused, storedSince("v1beta1", time.Minute), run(running), with(replaced(before, stalledReady), 3)), nil,
			want{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, conditions: []metav1.Condition{
				{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
					Reason: graduation.ReasonPaused, Message: "the policy is paused; set spec.paused to false to continue"},
				before[1], before[2], // True stays True
				waiting(graduatorv1alpha1.ConditionMigrated), waiting(graduatorv1alpha1.ConditionStoredVersionsPruned),
				waiting(graduatorv1alpha1.ConditionVersionsRetired),
			}}),
	)
})

// plain keeps what Plan decides of each condition: the reconciler sets the
// timestamps and the observed generation. Reconciling and Stalled follow
// Ready; kstatus_test.go checks them.
func plain(conditions []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conditions))
	for _, c := range conditions {
		if c.Type == graduatorv1alpha1.ConditionReconciling || c.Type == graduatorv1alpha1.ConditionStalled {
			continue
		}
		out = append(out, metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	return out
}

var _ = Describe("RewriteAll: every object rewritten once on a CRD with nothing stale", func() {
	betaStorage := ver{name: "v1beta1", flags: "sS"}
	clean := func() *apiextensionsv1.CustomResourceDefinition { return crd([]string{"v1beta1"}, betaStorage) }
	plan := func(p *graduatorv1alpha1.CRDVersionPolicy, preflight *graduation.PreflightResult) graduation.Step {
		return graduation.Plan(graduation.Input{CRD: clean(), Policy: p, Now: now, Preflight: preflight,
			StorageSettled: true, RewriteAll: true})
	}
	done := graduatorv1alpha1.MigrationStatus{StorageVersion: "v1beta1", CRDGeneration: 5, Listed: 10, Rewritten: 10,
		StartedAt: ago(time.Minute), CompletedAt: ago(30 * time.Second)}

	It("runs the preflight, then a fresh run, where it would otherwise say nothing to migrate", func() {
		Expect(plan(policy("", storedSince("v1beta1", time.Hour)), nil).Action).To(Equal(graduation.ActionPreflight))
		step := plan(policy("", storedSince("v1beta1", time.Hour)), &graduation.PreflightResult{Passed: true})
		Expect(step.Action).To(Equal(graduation.ActionMigrate), step.Message())
		Expect(step.Restart).To(BeTrue())
	})
	It("goes on with a run of this generation that has not completed", func() {
		partial := done
		partial.CompletedAt = nil
		Expect(plan(policy("", run(partial)), nil).Action).To(Equal(graduation.ActionMigrate))
	})
	It("is met by a complete run of this CRD generation, and then the CRD is graduated", func() {
		step := plan(policy("", run(done)), nil)
		Expect(step.Action).To(Equal(graduation.ActionNone), step.Message())
		Expect(step.Phase).To(Equal(graduatorv1alpha1.PhaseGraduated))
	})
	It("is not met by a complete run of an earlier CRD generation", func() {
		earlier := done
		earlier.CRDGeneration = 4
		step := plan(policy("", run(earlier), storedSince("v1beta1", time.Hour)), &graduation.PreflightResult{Passed: true})
		Expect(step.Action).To(Equal(graduation.ActionMigrate), step.Message())
	})
})
