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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	graduatorv1alpha1 "github.com/graduator/graduator/api/v1alpha1"
	"github.com/graduator/graduator/internal/graduation"
	"github.com/graduator/graduator/internal/storagemigration"
)

func inTreeEngine(p *graduatorv1alpha1.CRDVersionPolicy) {
	p.Spec.Migration.Engine = graduatorv1alpha1.EngineStorageVersionMigration
}

// svm is the in-tree migration Graduator created for the Pizza CRD, with
// the given UID and, when not empty, a True condition of that type.
func svm(uid types.UID, condType svmv1.MigrationConditionType, message string) *svmv1.StorageVersionMigration {
	m := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: storagemigration.NameFor("pizzas.restaurant.example.com"), UID: uid},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "restaurant.example.com", Resource: "pizzas"}},
	}
	if condType != "" {
		m.Status.Conditions = []metav1.Condition{{Type: string(condType), Status: metav1.ConditionTrue, Reason: "R", Message: message}}
	}
	return m
}

var _ = Describe("Plan with engine StorageVersionMigration", func() {
	alphaServed := ver{name: "v1alpha1", flags: "s"}
	betaStorage := ver{name: "v1beta1", flags: "sS"}
	stored := func() *apiextensionsv1.CustomResourceDefinition {
		return crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage)
	}
	name := storagemigration.NameFor("pizzas.restaurant.example.com")
	following := func(uid types.UID) graduatorv1alpha1.MigrationStatus {
		return graduatorv1alpha1.MigrationStatus{
			StorageVersion: "v1beta1", CRDGeneration: 5, StartedAt: ago(time.Minute),
			StorageVersionMigration: &graduatorv1alpha1.InTreeMigration{Name: name, UID: uid, Phase: "Running", Created: 1},
		}
	}
	succeeded := following("a")
	succeeded.CompletedAt = ago(time.Second)

	DescribeTable("the next step",
		func(c *apiextensionsv1.CustomResourceDefinition, p *graduatorv1alpha1.CRDVersionPolicy,
			inTree *svmv1.StorageVersionMigration, want expect) {
			step := graduation.Plan(graduation.Input{CRD: c, Policy: p, Now: now, StorageSettled: true, StorageVersionMigration: inTree})
			Expect(step.Action).To(Equal(want.action), "action; Ready says %q", step.Message())
			Expect(step.Phase).To(Equal(want.phase), "phase")
			Expect(step.Restart).To(Equal(want.restart), "restart")
			Expect(step.RequeueAfter).To(Equal(want.requeue), "requeue after")
			ready := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionReady)
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
		},
		Entry("it waits for the storage switch to settle like Graduator's engine",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", 4*time.Second)), nil,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 6 * time.Second,
				readyReason: graduation.ReasonInProgress, condition: graduatorv1alpha1.ConditionMigrated,
				condStatus: metav1.ConditionFalse, condReason: graduation.ReasonSettling}),
		Entry("a settled switch creates the StorageVersionMigration (a new run)",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute)), nil,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true,
				readyReason: graduation.ReasonInProgress, messageParts: []string{name}}),
		Entry("a StorageVersionMigration of an earlier run under the same name is not this run's: a new run",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute)), svm("old", svmv1.MigrationSucceeded, ""),
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true,
				readyReason: graduation.ReasonInProgress}),
		Entry("a running StorageVersionMigration of this run is followed, not written",
			inTreeMigrating(stored(), 5), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(following("a"))),
			svm("a", "", ""),
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 5 * time.Second,
				readyReason: graduation.ReasonInProgress, messageParts: []string{name},
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionFalse, condReason: graduation.ReasonMigrating}),
		Entry("someone else's in-tree run (by hand) before ours: no second one beside it",
			inTreeMigrating(stored(), 5), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute)), nil,
			expect{action: graduation.ActionNone, phase: graduatorv1alpha1.PhaseMigrating, requeue: 10 * time.Second,
				readyReason: graduation.ReasonInTreeMigrationRunning}),
		Entry("this run's StorageVersionMigration is gone (deleted after it Failed): it is created again, same run",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(following("a"))), nil,
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating,
				readyReason: graduation.ReasonInProgress, messageParts: []string{name}}),
		Entry("a Failed StorageVersionMigration says why in Ready and is deleted to be created again; nothing is pruned",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(following("a"))),
			svm("a", svmv1.MigrationFailed, "conversion webhook for restaurant.example.com/v1alpha1 failed"),
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating,
				readyReason: graduation.ReasonInTreeMigrationFailed, messageParts: []string{name, "conversion webhook"},
				condition: graduatorv1alpha1.ConditionStoredVersionsPruned, condStatus: metav1.ConditionFalse,
				condReason: graduation.ReasonWaitingForMigration}),
		Entry("a Succeeded run whose prune the in-tree migrator did not make: Graduator prunes, as after a run of its own",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(succeeded)), svm("a", svmv1.MigrationSucceeded, ""),
			expect{action: graduation.ActionPrune, phase: graduatorv1alpha1.PhasePruning, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionTrue, condReason: graduation.ReasonMigrated}),
		Entry("a Succeeded run on an older CRD generation does not prune: a new run",
			func() *apiextensionsv1.CustomResourceDefinition { c := stored(); c.Generation = 6; return c }(),
			policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(succeeded)), svm("a", svmv1.MigrationSucceeded, ""),
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, restart: true,
				readyReason: graduation.ReasonInProgress}),
		Entry("a Succeeded in-tree run is checked by Graduator's engine from the run's checkpoint before anything else",
			stored(), policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(withPhase(following("a"), "Succeeded"))),
			svm("a", svmv1.MigrationSucceeded, ""),
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating, readyReason: graduation.ReasonInProgress,
				messageParts: []string{"verifying"}}),
		Entry("storedVersions pruned by the in-tree migrator while this run is unchecked proves nothing: no retirement",
			inTreeDone(crd([]string{"v1beta1"}, alphaServed, betaStorage)),
			policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(following("a")), deprecate("v1alpha1", "use v1beta1")),
			svm("a", svmv1.MigrationFailed, "denied"),
			expect{action: graduation.ActionMigrate, phase: graduatorv1alpha1.PhaseMigrating,
				readyReason: graduation.ReasonInTreeMigrationFailed}),
		Entry("after the in-tree migrator pruned, the plan goes on to retire and says who migrated",
			inTreeDone(crd([]string{"v1beta1"}, alphaServed, betaStorage)),
			policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(succeeded), deprecate("v1alpha1", "use v1beta1")),
			svm("a", svmv1.MigrationSucceeded, ""),
			expect{action: graduation.ActionDeprecate, phase: graduatorv1alpha1.PhaseRetiring, readyReason: graduation.ReasonInProgress,
				condition: graduatorv1alpha1.ConditionMigrated, condStatus: metav1.ConditionTrue, condReason: graduation.ReasonMigrated}),
	)
})

var _ = Describe("Plan with engine StorageVersionMigration, the conversion webhook down", func() {
	It("says in Ready that the running in-tree migration is stuck on conversion, and follows it", func() {
		alphaServed := ver{name: "v1alpha1", flags: "s"}
		betaStorage := ver{name: "v1beta1", flags: "sS"}
		following := graduatorv1alpha1.MigrationStatus{
			StorageVersion: "v1beta1", CRDGeneration: 5, StartedAt: ago(time.Minute),
			StorageVersionMigration: &graduatorv1alpha1.InTreeMigration{Name: "graduator-pizzas", UID: "a", Phase: "Running", Created: 1},
		}
		in := graduation.Input{
			CRD:    inTreeMigrating(crd([]string{"v1alpha1", "v1beta1"}, alphaServed, betaStorage), 5),
			Policy: policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(following)), Now: now, StorageSettled: true,
			StorageVersionMigration: svm("a", "", ""),
		}
		Expect(meta.FindStatusCondition(graduation.Plan(in).Conditions, graduatorv1alpha1.ConditionReady).Reason).
			To(Equal(graduation.ReasonInProgress), "no failed read: following")
		in.InTreeConversionFailed = `reading pizzas at v1alpha1: conversion webhook for restaurant.example.com/v1beta1, Kind=Pizza failed: connection refused`
		step := graduation.Plan(in)
		ready := meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionReady)
		Expect(ready.Reason).To(Equal(graduation.ReasonConversionFailed))
		Expect(ready.Message).To(And(ContainSubstring("graduator-pizzas"), ContainSubstring("connection refused")))
		Expect(step.Action).To(Equal(graduation.ActionNone), "the in-tree migrator retries by itself")
		Expect(step.RequeueAfter).To(BeNumerically(">", 0), "followed")

		// The webhook is back: the next plan creates the migration again
		// rather than wait out the in-tree migrator's backoff.
		in.Policy.Status.Conditions = step.Conditions
		in.InTreeConversionFailed = ""
		again := graduation.Plan(in)
		Expect(again.Action).To(Equal(graduation.ActionMigrate))
		Expect(again.Restart).To(BeTrue(), "a new StorageVersionMigration, from a new checkpoint")
	})
})

var _ = Describe("ObserveInTree", func() {
	run := func() *graduatorv1alpha1.CRDVersionPolicyStatus {
		return &graduatorv1alpha1.CRDVersionPolicyStatus{Migration: &graduatorv1alpha1.MigrationStatus{
			StorageVersion: "v1beta1", CRDGeneration: 5,
			StorageVersionMigration: &graduatorv1alpha1.InTreeMigration{Name: "graduator-pizzas", UID: "a", Phase: "Running"},
		}}
	}
	It("records Succeeded without completing the run: Graduator checks it first", func() {
		status := run()
		graduation.ObserveInTree(status, svm("a", svmv1.MigrationSucceeded, ""))
		Expect(status.Migration.CompletedAt).To(BeNil())
		Expect(status.Migration.StorageVersionMigration.Phase).To(Equal("Succeeded"))
	})
	It("takes nothing from one of another UID (an earlier run's, or made by hand under that name)", func() {
		status := run()
		graduation.ObserveInTree(status, svm("b", svmv1.MigrationSucceeded, ""))
		Expect(status.Migration.StorageVersionMigration.Phase).To(Equal("Running"))
	})
	It("records a failure", func() {
		status := run()
		graduation.ObserveInTree(status, svm("a", svmv1.MigrationFailed, "webhook down"))
		Expect(status.Migration.CompletedAt).To(BeNil())
		Expect(status.Migration.StorageVersionMigration.Phase).To(Equal("Failed"))
	})
})

var _ = Describe("StallReason of a Failed in-tree migration", func() {
	It("is InTreeMigrationFailed, even when its message names a conversion webhook", func() {
		err := &storagemigration.FailedError{Name: "graduator-pizzas", Reason: "R", Message: "conversion webhook for x failed"}
		Expect(graduation.StallReason("Migrate", err)).To(Equal(graduation.ReasonInTreeMigrationFailed))
	})
})

var _ = Describe("StallOf engine StorageVersionMigration on a server before 1.37", func() {
	It("is InTreeMigrationUnavailable and names the release it needs", func() {
		stall := graduation.StallOf("Preflight", fmt.Errorf("check access: %w",
			&storagemigration.UnservedError{ServerVersion: "v1.30.14"}), 1)
		Expect(stall.Reason).To(Equal(graduation.ReasonInTreeMigrationUnavailable))
		Expect(stall.Message).To(ContainSubstring("Kubernetes v1.30.14) does not serve storagemigration.k8s.io/v1"))
		Expect(stall.Message).To(ContainSubstring("needs Kubernetes 1.37 or newer"))
	})
	It("says so too for a client's no match of the StorageVersionMigration kind (a GitOps CRD already switched)", func() {
		noKind := &meta.NoKindMatchError{GroupKind: svmv1.SchemeGroupVersion.WithKind("StorageVersionMigration").GroupKind()}
		stall := graduation.StallOf("GetStorageVersionMigration", fmt.Errorf("get StorageVersionMigration x: %w", noKind), 1)
		Expect(stall.Reason).To(Equal(graduation.ReasonInTreeMigrationUnavailable))
		Expect(stall.Message).To(ContainSubstring("needs Kubernetes 1.37 or newer"))
	})
})

func withPhase(r graduatorv1alpha1.MigrationStatus, phase string) graduatorv1alpha1.MigrationStatus {
	ref := *r.StorageVersionMigration
	ref.Phase = phase
	r.StorageVersionMigration = &ref
	return r
}

var _ = Describe("Following an in-tree migration created again after a failure", func() {
	It("keeps the failure in Ready and counts the attempts on until it Succeeds", func() {
		failedReady := metav1.Condition{Type: graduatorv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: graduation.ReasonInTreeMigrationFailed, Message: "Migrate failed (attempt 2): the in-tree StorageVersionMigration failed"}
		p := policy("v1beta1", inTreeEngine, storedSince("v1beta1", time.Minute), run(graduatorv1alpha1.MigrationStatus{
			StorageVersion: "v1beta1", CRDGeneration: 5, StartedAt: ago(time.Minute),
			StorageVersionMigration: &graduatorv1alpha1.InTreeMigration{Name: "graduator-pizzas", UID: "b", Phase: "Running", Created: 2},
		}))
		p.Status.Conditions = []metav1.Condition{failedReady}
		step := graduation.Plan(graduation.Input{
			CRD:    crd([]string{"v1alpha1", "v1beta1"}, ver{name: "v1alpha1", flags: "s"}, ver{name: "v1beta1", flags: "sS"}),
			Policy: p, Now: now, StorageSettled: true, StorageVersionMigration: svm("b", "", ""), Attempts: 2,
		})
		Expect(step.Action).To(Equal(graduation.ActionNone))
		Expect(step.Retries).To(Equal(int32(2)), "the next failure waits longer")
		Expect(step.Reason()).To(Equal(graduation.ReasonInTreeMigrationFailed))
		Expect(step.Message()).To(Equal(failedReady.Message))
		Expect(meta.FindStatusCondition(step.Conditions, graduatorv1alpha1.ConditionMigrated).Message).To(ContainSubstring("created 2 times"))
	})
})
